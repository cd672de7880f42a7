/* report.js - the script of sonde's HTML report (src/export/html.c embeds this file and writes
 * the run's data into the page as JSON, in the script element of id sonde-data; docs/formats.md
 * describes it). It draws:
 *   - the timeline: a row per thread and nesting depth, named after the thread, with the
 *     sessions and steps as tracks above; one time axis with ticks; zoom (wheel, pinch, a range
 *     dragged with shift or on the axis) and pan (drag), spans under a pixel merged per row, so
 *     a million of them stay responsive; hover for a span's name, duration, self time and
 *     metadata; click to select it (its statistics and children); a search box that highlights
 *     spans by name; a legend; the top names in distinct colours;
 *   - the counter charts under it, on the same time axis, with y axes and units (from zero
 *     where the unit has one: %, memory, power);
 *   - the step breakdown (a stacked bar per step by its top sections);
 *   - the flame graph of the CPU samples, of the whole run or of one section;
 *   - and it sorts the statistics table by the clicked column.
 * No network, no other file. window.sondeReport exposes the view for tests (tests/browser). */
(function () {
  'use strict';

  var LABEL_W = 150;        // the label column, px (report.css --label-w)
  var RIGHT = 10;           // room right of the drawing, px
  var ROW_H = 18;           // a timeline row, px
  var COUNTER_H = 72;       // a counter chart, px
  var FLAME_ROW = 17;       // a flame graph row, px
  var MIN_SPAN_NS = 100;    // the narrowest view
  var PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1',
    '#ff9da7', '#9c755f', '#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#8c564b', '#17becf',
    '#bcbd22', '#7f7f7f', '#aec7e8', '#ffbb78', '#98df8a'];

  sortableTables();
  var holder = document.getElementById('sonde-data');
  var D = holder ? JSON.parse(holder.textContent) : null;
  if (!D) {
    document.body.setAttribute('data-ready', '1');
    return;
  }
  var dpr = window.devicePixelRatio || 1;
  var dur = Math.max(D.duration_ns || 0, 1);

  // ---- formatting ----
  function fmtDur(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + ' s';
    if (a >= 1e6) return (ns / 1e6).toFixed(3) + ' ms';
    if (a >= 1e3) return (ns / 1e3).toFixed(3) + ' \u00b5s';
    return Math.round(ns) + ' ns';
  }
  function fmtNum(v) {
    var a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toPrecision(3) + ' G';
    if (a >= 1e6) return (v / 1e6).toPrecision(3) + ' M';
    if (a >= 1e4) return (v / 1e3).toPrecision(3) + ' K';
    if (a >= 100 || v === Math.round(v)) return String(Math.round(v));
    return v.toPrecision(3);
  }
  function text(tag, cls, s) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (s !== undefined) e.textContent = s;
    return e;
  }
  function fmtTick(ns) {   // an axis label: as few digits as the value needs
    var a = Math.abs(ns), u = a >= 1e9 ? 1e9 : a >= 1e6 ? 1e6 : a >= 1e3 ? 1e3 : 1;
    return String(+(ns / u).toPrecision(4)) + (u === 1e9 ? ' s' : u === 1e6 ? ' ms' : u === 1e3 ? ' \u00b5s' : ' ns');
  }
  function niceStep(raw) {   // 1, 2 or 5 times a power of ten, at least raw
    var p = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function threadName(t) {
    var th = D.threads[t];
    return th && th.name ? th.name : 'tid ' + (th ? th.tid : t);
  }

  // ---- spans: columns decoded into typed arrays ----
  var S = D.spans, n = S.n;
  var st = new Float64Array(n), du = new Float64Array(n), ch = new Float64Array(n);
  var nk = new Int32Array(n), th = new Int32Array(n), dp = new Int32Array(n);
  var acc = 0, i;
  for (i = 0; i < n; i++) {
    acc += S.t[i];
    st[i] = acc;
    du[i] = S.d[i];
    ch[i] = S.c[i];
    nk[i] = S.k[i];
    th[i] = S.h[i];
    dp[i] = S.z[i];
  }
  var meta = new Map();
  S.meta.forEach(function (m) { meta.set(m[0], m[1]); });
  var names = D.names;

  // colours: the names of most time first, each its own colour; the rest muted
  var nameTotal = new Float64Array(names.length);
  for (i = 0; i < n; i++) nameTotal[nk[i]] += du[i];
  var byTotal = names.map(function (_, k) { return k; })
    .sort(function (a, b) { return nameTotal[b] - nameTotal[a]; });
  var colour = new Array(names.length);
  byTotal.forEach(function (k, r) {
    if (r < PALETTE.length) { colour[k] = PALETTE[r]; return; }
    var h = 2166136261;
    for (var c = 0; c < names[k].length; c++) h = Math.imul(h ^ names[k].charCodeAt(c), 16777619);
    colour[k] = 'hsl(' + ((h >>> 0) % 360) + ',18%,72%)';
  });
  function colourOf(name) {
    var k = names.indexOf(name);
    return k >= 0 ? colour[k] : '#8aa6c8';
  }

  // rows: the tracks, then per thread one per depth; each row's spans in order of start (one
  // row's spans never overlap, so their ends are in order too)
  var rows = [];
  if (D.sessions.length) rows.push({ kind: 'sessions', label: 'sessions' });
  if (D.steps.length) rows.push({ kind: 'steps', label: 'steps' });
  var maxDepth = new Map();
  for (i = 0; i < n; i++) if (!(maxDepth.get(th[i]) >= dp[i])) maxDepth.set(th[i], dp[i]);
  var rowOf = new Map();
  D.threads.forEach(function (_, t) {
    if (!maxDepth.has(t)) return;
    for (var z = 0; z <= maxDepth.get(t); z++) {
      rowOf.set(t * 65536 + z, rows.length);
      rows.push({ kind: 'spans', thread: t, depth: z, count: 0,
        label: z ? 'depth ' + z : threadName(t) });
    }
  });
  for (i = 0; i < n; i++) rows[rowOf.get(th[i] * 65536 + dp[i])].count++;
  rows.forEach(function (r) { if (r.kind === 'spans') { r.idx = new Int32Array(r.count); r.count = 0; } });
  for (i = 0; i < n; i++) {
    var r = rows[rowOf.get(th[i] * 65536 + dp[i])];
    r.idx[r.count++] = i;
  }
  function firstEndingAfter(r, t) {   // the first span of the row ending at or after t
    var lo = 0, hi = r.idx.length;
    while (lo < hi) {
      var mid = (lo + hi) >> 1, k = r.idx[mid];
      if (st[k] + du[k] < t) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  // ---- the view, shared by the timeline and the counter charts ----
  var v0 = 0, v1 = dur;
  var view = document.getElementById('timeline-view');
  var plotW = 100;
  function X(t) { return LABEL_W + (t - v0) / (v1 - v0) * plotW; }
  function T(x) { return v0 + (x - LABEL_W) / plotW * (v1 - v0); }
  var pending = false;
  function setView(a, b) {
    if (b - a < MIN_SPAN_NS) { var c = (a + b) / 2; a = c - MIN_SPAN_NS / 2; b = c + MIN_SPAN_NS / 2; }
    var w = b - a;
    if (w > dur) { a = 0; b = dur; } else if (a < 0) { a = 0; b = w; } else if (b > dur) { b = dur; a = dur - w; }
    v0 = a;
    v1 = b;
    redraw();
  }
  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; drawAll(); });
  }

  // ---- page structure ----
  var axis = text('div', 'time-axis');
  axis.id = 'time-axis';
  var rowsBox = text('div', 'rows');
  var canvas = document.createElement('canvas');
  canvas.id = 'timeline-canvas';
  var labels = text('div', 'row-labels');
  rowsBox.appendChild(canvas);
  rowsBox.appendChild(labels);
  var selectBox = text('div', 'selectbox');
  selectBox.hidden = true;
  rowsBox.appendChild(selectBox);
  if (view) {
    view.appendChild(axis);
    view.appendChild(rowsBox);
  }
  rows.forEach(function (r, k) {
    var l = text('div', 'row-label' + (r.kind !== 'spans' ? ' track' : r.depth ? ' sub' : ''), r.label);
    l.style.top = k * ROW_H + 'px';
    l.style.lineHeight = ROW_H + 'px';
    if (r.kind === 'spans' && !r.depth) {
      l.setAttribute('data-thread', String(D.threads[r.thread].tid));
      l.title = threadName(r.thread) + ' (tid ' + D.threads[r.thread].tid + ')';
    }
    labels.appendChild(l);
  });
  if (!n && view) view.appendChild(text('p', 'note', 'No section was recorded.'));

  var counters = D.counters.map(function (c) {
    var box = text('div', 'counter');
    var cv = document.createElement('canvas');
    box.appendChild(cv);
    box.appendChild(text('div', 'counter-name', c.name));
    if (view) view.appendChild(box);
    var m = c.t.length, t = new Float64Array(m), v = new Float64Array(m), a2 = 0, lo = Infinity, hi = -Infinity;
    for (var q = 0; q < m; q++) {
      a2 += c.t[q];
      t[q] = a2;
      v[q] = c.v[q] === null ? NaN : c.v[q];
      if (v[q] < lo) lo = v[q];
      if (v[q] > hi) hi = v[q];
    }
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    if (c.zero) lo = Math.min(0, lo);
    if (hi <= lo) { hi = lo + (Math.abs(lo) || 1); }
    var step = niceStep((hi - lo) / 3);
    lo = Math.floor(lo / step) * step;
    hi = Math.ceil(hi / step) * step;
    return { c: c, box: box, cv: cv, t: t, v: v, lo: lo, hi: hi, step: step };
  });

  var tip = text('div', 'tip');
  tip.hidden = true;
  document.body.appendChild(tip);
  function showTip(e, nodes) {
    tip.textContent = '';
    nodes.forEach(function (x) { tip.appendChild(x); });
    tip.hidden = false;
    var x = e.clientX + 14, y = e.clientY + 14;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth - 4) x = Math.max(4, e.clientX - w - 10);
    if (y + h > window.innerHeight - 4) y = Math.max(4, e.clientY - h - 10);
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  }
  function hideTip() { tip.hidden = true; }
  function line(label, value) {
    var d = text('div');
    d.appendChild(text('span', 'kv', label + ' '));
    d.appendChild(document.createTextNode(value));
    return d;
  }

  // ---- search and legend ----
  var search = document.getElementById('search');
  var matched = null;   // per name: highlighted
  function applySearch() {
    var q = search ? search.value.trim().toLowerCase() : '';
    if (!q) { matched = null; } else {
      matched = new Uint8Array(names.length);
      names.forEach(function (nm, k) { matched[k] = nm.toLowerCase().indexOf(q) >= 0 ? 1 : 0; });
    }
    var count = 0;
    if (matched) for (var k = 0; k < n; k++) count += matched[nk[k]];
    var range = document.getElementById('view-range');
    if (range) range.setAttribute('data-matches', matched ? String(count) : '');
    redraw();
  }
  if (search) search.addEventListener('input', applySearch);
  var legend = document.getElementById('legend');
  if (legend) {
    byTotal.slice(0, PALETTE.length).forEach(function (k) {
      if (!nameTotal[k]) return;
      var it = text('span', 'item');
      var sw = text('span', 'sw');
      sw.style.background = colour[k];
      it.appendChild(sw);
      it.appendChild(document.createTextNode(names[k]));
      it.title = names[k] + ': ' + fmtDur(nameTotal[k]) + ' in all';
      it.addEventListener('click', function () {
        if (search) { search.value = search.value === names[k] ? '' : names[k]; applySearch(); }
      });
      legend.appendChild(it);
    });
    if (names.length > PALETTE.length) {
      var o = text('span', 'item');
      var sw2 = text('span', 'sw');
      sw2.style.background = 'hsl(210,18%,72%)';
      o.appendChild(sw2);
      o.appendChild(document.createTextNode((names.length - PALETTE.length) + ' other names (muted)'));
      legend.appendChild(o);
    }
  }
  document.querySelectorAll('.stage-bar[data-name]').forEach(function (b) {
    b.style.background = colourOf(b.getAttribute('data-name'));
  });

  // ---- drawing ----
  function sizeCanvas(cv, w, h) {
    cv.style.width = w + 'px';
    cv.style.height = h + 'px';
    if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(h * dpr)) {
      cv.width = Math.round(w * dpr);
      cv.height = Math.round(h * dpr);
    }
    var c = cv.getContext('2d');
    c.setTransform(dpr, 0, 0, dpr, 0, 0);
    return c;
  }
  var selected = -1;

  function drawAxis() {
    axis.textContent = '';
    var span = v1 - v0;
    // the widest 1-2-5 step that still gives five ticks or more (one per 130 px at most)
    var raw = span / Math.max(5, Math.floor(plotW / 130)), p = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = (raw / p >= 5 ? 5 : raw / p >= 2 ? 2 : 1) * p;
    var unit = step >= 1e9 ? 1e9 : step >= 1e6 ? 1e6 : step >= 1e3 ? 1e3 : 1;
    var uname = unit === 1e9 ? ' s' : unit === 1e6 ? ' ms' : unit === 1e3 ? ' \u00b5s' : ' ns';
    var dec = Math.max(0, Math.ceil(-Math.log10(step / unit) - 1e-9));
    var ticks = [];
    for (var t = Math.ceil(v0 / step) * step; t <= v1 + step * 1e-9; t += step) ticks.push(t);
    ticks.forEach(function (t) {
      var s = text('span', 'tick', (t / unit).toFixed(dec) + uname), x = (t - v0) / span * plotW;
      s.style.left = x + 'px';
      if (x < 30) s.classList.add('first');        // kept inside the axis at its ends
      else if (x > plotW - 30) s.classList.add('last');
      s.setAttribute('data-ns', String(Math.round(t)));
      axis.appendChild(s);
    });
    return ticks;
  }

  function drawTimeline() {
    var W = LABEL_W + plotW + RIGHT, H = Math.max(rows.length, 1) * ROW_H;
    var c = sizeCanvas(canvas, W, H);
    c.clearRect(0, 0, W, H);
    c.font = '11px system-ui, sans-serif';
    c.textBaseline = 'middle';
    var lastThread = -1, band = 0;
    rows.forEach(function (r, k) {
      var y = k * ROW_H;
      if (r.kind === 'spans' && r.thread !== lastThread) { band ^= 1; lastThread = r.thread; }
      c.fillStyle = r.kind !== 'spans' ? '#eef1f4' : band ? '#f9fafb' : '#ffffff';
      c.fillRect(0, y, W, ROW_H);
      c.save();
      c.beginPath();
      c.rect(LABEL_W, y, plotW, ROW_H);
      c.clip();
      if (r.kind === 'sessions') drawItems(c, y, D.sessions.map(function (s) { return [s[0], s[1], s[2]]; }), '#6e7781');
      else if (r.kind === 'steps') drawItems(c, y, D.steps.map(function (s) { return ['step ' + s[0], s[1], s[2]]; }), '#8c959f');
      else drawRow(c, r, k, y);
      c.restore();
    });
    c.strokeStyle = '#d8dee4';
    c.beginPath();
    c.moveTo(LABEL_W - 0.5, 0);
    c.lineTo(LABEL_W - 0.5, H);
    c.stroke();
  }
  function drawItems(c, y, items, fill) {
    items.forEach(function (it, k) {
      var x0 = X(it[1]), x1 = X(it[2]);
      if (x1 < LABEL_W || x0 > LABEL_W + plotW) return;
      c.fillStyle = k % 2 ? fill : shade(fill);
      c.fillRect(x0, y + 2, Math.max(1, x1 - x0 - 1), ROW_H - 4);
      label(c, it[0], x0, x1, y, '#fff');
    });
  }
  function shade(hex) { return hex === '#6e7781' ? '#57606a' : '#6e7781'; }
  function label(c, s, x0, x1, y, ink) {
    var a = Math.max(x0, LABEL_W), b = Math.min(x1, LABEL_W + plotW);
    if (b - a < 28) return;
    c.fillStyle = ink;
    var w = b - a - 6, t = s;
    if (c.measureText(t).width > w) {
      var keep = Math.max(1, Math.floor(t.length * w / c.measureText(t).width) - 1);
      t = t.slice(0, keep) + '\u2026';
    }
    c.fillText(t, a + 3, y + ROW_H / 2);
  }
  function drawRow(c, r, k0, y) {
    var idx = r.idx, m = idx.length;
    var runA = -1, runB = -1, runK = -1;
    function flush() {
      if (runA < 0) return;
      c.globalAlpha = matched && !matched[runK] ? 0.15 : 1;
      c.fillStyle = colour[runK];
      c.fillRect(runA, y + 2, Math.max(1, runB - runA), ROW_H - 4);
      runA = -1;
    }
    for (var q = firstEndingAfter(r, v0); q < m; q++) {
      var k = idx[q];
      if (st[k] > v1) break;
      var x0 = X(st[k]), x1 = X(st[k] + du[k]);
      if (x1 - x0 < 1) {   // under a pixel: merged with its neighbours
        if (runA >= 0 && x0 <= runB + 1) { if (x1 > runB) runB = x1; continue; }
        flush();
        runA = x0; runB = x1; runK = nk[k];
        continue;
      }
      flush();
      c.globalAlpha = matched && !matched[nk[k]] ? 0.15 : 1;
      c.fillStyle = colour[nk[k]];
      c.fillRect(x0, y + 2, Math.max(1, x1 - x0 - 0.5), ROW_H - 4);
      if (matched && matched[nk[k]]) {
        c.strokeStyle = '#1f2328';
        c.strokeRect(x0 + 0.5, y + 2.5, Math.max(1, x1 - x0 - 1.5), ROW_H - 5);
      }
      label(c, names[nk[k]], x0, x1, y, '#1f2328');
    }
    flush();
    c.globalAlpha = 1;
    if (selected >= 0 && rowOf.get(th[selected] * 65536 + dp[selected]) === k0) {
      var a = X(st[selected]), b = X(st[selected] + du[selected]);
      c.strokeStyle = '#0969da';
      c.lineWidth = 2;
      c.strokeRect(a, y + 1, Math.max(2, b - a), ROW_H - 2);
      c.lineWidth = 1;
    }
  }

  function drawCounter(k, ticks) {
    var W = LABEL_W + plotW + RIGHT, H = COUNTER_H;
    var c = sizeCanvas(k.cv, W, H);
    c.clearRect(0, 0, W, H);
    var top = 6, bottom = H - 6;
    function Y(v) { return bottom - (v - k.lo) / (k.hi - k.lo) * (bottom - top); }
    c.font = '10.5px system-ui, sans-serif';
    c.textBaseline = 'middle';
    c.textAlign = 'right';
    c.strokeStyle = '#eaeef2';
    for (var g = k.lo; g <= k.hi + k.step * 1e-9; g += k.step) {
      var y = Math.round(Y(g)) + 0.5;
      c.beginPath();
      c.moveTo(LABEL_W, y);
      c.lineTo(LABEL_W + plotW, y);
      c.stroke();
      c.fillStyle = '#59636e';
      c.fillText(fmtNum(g) + (k.c.unit ? ' ' + k.c.unit : ''), LABEL_W - 4, Math.min(Math.max(y, 6), H - 6));
    }
    c.strokeStyle = '#d8dee4';
    ticks.forEach(function (t) {
      var x = Math.round(X(t)) + 0.5;
      c.beginPath();
      c.moveTo(x, bottom);
      c.lineTo(x, bottom + 4);
      c.stroke();
    });
    c.save();
    c.beginPath();
    c.rect(LABEL_W, 0, plotW, H);
    c.clip();
    c.strokeStyle = colourOf(k.c.name) === '#8aa6c8' ? '#0969da' : colourOf(k.c.name);
    c.lineWidth = 1.5;
    c.beginPath();
    var t = k.t, v = k.v, m = t.length, lo = 0, hi = m;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (t[mid] < v0) lo = mid + 1; else hi = mid; }
    var started = false;
    for (var q = Math.max(0, lo - 1); q < m; q++) {
      if (!isFinite(v[q])) { started = false; continue; }
      var x = X(t[q]), yy = Y(v[q]);
      if (!started) { c.moveTo(x, yy); started = true; } else c.lineTo(x, yy);
      if (t[q] > v1) break;
    }
    c.stroke();
    c.restore();
    k.box.setAttribute('data-t0', String(Math.round(v0)));
    k.box.setAttribute('data-t1', String(Math.round(v1)));
  }

  function layout() {
    var w = view ? view.clientWidth : 900;
    plotW = Math.max(100, w - LABEL_W - RIGHT);
  }
  var firstPaint = true;
  function drawAll() {
    if (!view) return;
    layout();
    var ticks = drawAxis();
    drawTimeline();
    counters.forEach(function (k) { drawCounter(k, ticks); });
    view.setAttribute('data-t0', String(Math.round(v0)));
    view.setAttribute('data-t1', String(Math.round(v1)));
    var range = document.getElementById('view-range');
    if (range) {
      var s = 'showing ' + fmtDur(v0) + ' to ' + fmtDur(v1) + ' of ' + fmtDur(dur);
      if (range.getAttribute('data-matches')) s += ' \u00b7 ' + range.getAttribute('data-matches') + ' sections match';
      range.textContent = s;
    }
    if (firstPaint) {
      firstPaint = false;
      performance.mark('sonde-first-paint');
    }
  }

  // ---- hover, select, zoom, pan ----
  function spanAt(x, y) {
    var k = Math.floor(y / ROW_H), r = rows[k];
    if (!r || r.kind !== 'spans' || x < LABEL_W) return -1;
    var t = T(x), slack = 2 * (v1 - v0) / plotW;   // two pixels either side
    var q = firstEndingAfter(r, t - slack), best = -1, bestGap = Infinity;
    for (; q < r.idx.length; q++) {
      var s = r.idx[q];
      if (st[s] > t + slack) break;
      var gap = t < st[s] ? st[s] - t : t > st[s] + du[s] ? t - st[s] - du[s] : 0;
      if (gap < bestGap) { bestGap = gap; best = s; }
      if (!gap) break;
    }
    return best;
  }
  function itemAt(x, y) {   // a session or a step under the pointer
    var r = rows[Math.floor(y / ROW_H)];
    if (!r || r.kind === 'spans' || x < LABEL_W) return null;
    var t = T(x), list = r.kind === 'sessions' ? D.sessions : D.steps;
    for (var q = 0; q < list.length; q++)
      if (list[q][1] <= t && t <= list[q][2])
        return [r.kind === 'sessions' ? 'session ' + list[q][0] : 'step ' + list[q][0], list[q][1], list[q][2]];
    return null;
  }
  function spanLines(s) {
    var out = [text('b', '', names[nk[s]]),
      line('duration', fmtDur(du[s])),
      line('self', fmtDur(du[s] - ch[s])),
      line('start', fmtDur(st[s])),
      line('thread', threadName(th[s]))];
    var md = meta.get(s);
    if (md) Object.keys(md).forEach(function (key) { out.push(line(key, md[key])); });
    return out;
  }
  function localXY(e, el) {
    var b = el.getBoundingClientRect();
    return [e.clientX - b.left, e.clientY - b.top];
  }

  var drag = null;
  function onMove(e) {
    if (drag) return;
    var p = localXY(e, canvas), s = spanAt(p[0], p[1]);
    if (s >= 0) { showTip(e, spanLines(s)); canvas.style.cursor = 'pointer'; return; }
    var it = itemAt(p[0], p[1]);
    canvas.style.cursor = '';
    if (it) showTip(e, [text('b', '', it[0]), line('duration', fmtDur(it[2] - it[1])), line('start', fmtDur(it[1]))]);
    else hideTip();
  }
  canvas.addEventListener('mousemove', onMove);
  canvas.addEventListener('mouseleave', hideTip);

  function beginDrag(e, mode, el) {
    if (e.button !== 0) return;
    e.preventDefault();
    var p = localXY(e, el);
    drag = { mode: mode, x: p[0], y: p[1], cx: e.clientX, a: v0, b: v1, moved: false, el: el };
    hideTip();
  }
  canvas.addEventListener('mousedown', function (e) { beginDrag(e, e.shiftKey ? 'range' : 'pan', canvas); });
  axis.addEventListener('mousedown', function (e) { beginDrag(e, 'range', canvas); });
  window.addEventListener('mousemove', function (e) {
    if (!drag) return;
    var dx = e.clientX - drag.cx;
    if (Math.abs(dx) > 3) drag.moved = true;
    if (!drag.moved) return;
    if (drag.mode === 'pan') {
      var dt = dx / plotW * (drag.b - drag.a);
      setView(drag.a - dt, drag.b - dt);
    } else {
      var x0 = Math.max(LABEL_W, Math.min(drag.x, drag.x + dx)), x1 = Math.min(LABEL_W + plotW, Math.max(drag.x, drag.x + dx));
      selectBox.hidden = false;
      selectBox.style.left = x0 + 'px';
      selectBox.style.width = (x1 - x0) + 'px';
    }
  });
  window.addEventListener('mouseup', function (e) {
    if (!drag) return;
    var d = drag;
    drag = null;
    selectBox.hidden = true;
    if (d.mode === 'range' && d.moved) {
      var dx = e.clientX - d.cx;
      var a = T(Math.max(LABEL_W, Math.min(d.x, d.x + dx))), b = T(Math.min(LABEL_W + plotW, Math.max(d.x, d.x + dx)));
      if (b > a) setView(a, b);
    } else if (!d.moved && d.el === canvas) {
      select(spanAt(d.x, d.y));
    }
  });
  function zoomAt(clientX, factor) {
    var x = clientX - canvas.getBoundingClientRect().left;
    var t = T(Math.max(LABEL_W, Math.min(LABEL_W + plotW, x)));
    setView(t - (t - v0) * factor, t + (v1 - t) * factor);
  }
  if (view) view.addEventListener('wheel', function (e) {
    e.preventDefault();
    var unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1;
    if (Math.abs(e.deltaX) > Math.abs(e.deltaY)) {   // sideways: pan
      var dt = e.deltaX * unit / plotW * (v1 - v0);
      setView(v0 + dt, v1 + dt);
      return;
    }
    zoomAt(e.clientX, Math.exp(e.deltaY * unit * (e.ctrlKey ? 0.01 : 0.0015)));   // ctrl: a pinch
  }, { passive: false });
  var pinch = null;   // two fingers on a touch screen
  if (view) {
    view.addEventListener('touchstart', function (e) {
      if (e.touches.length === 2) {
        pinch = { d: Math.abs(e.touches[0].clientX - e.touches[1].clientX) || 1, a: v0, b: v1,
          c: (e.touches[0].clientX + e.touches[1].clientX) / 2 };
      }
    }, { passive: true });
    view.addEventListener('touchmove', function (e) {
      if (!pinch || e.touches.length !== 2) return;
      e.preventDefault();
      var d2 = Math.abs(e.touches[0].clientX - e.touches[1].clientX) || 1;
      var x = pinch.c - canvas.getBoundingClientRect().left;
      var t = pinch.a + (x - LABEL_W) / plotW * (pinch.b - pinch.a), f = pinch.d / d2;
      setView(t - (t - pinch.a) * f, t + (pinch.b - t) * f);
    }, { passive: false });
    view.addEventListener('touchend', function () { pinch = null; });
  }
  var reset = document.getElementById('zoom-reset');
  if (reset) reset.addEventListener('click', function () { setView(0, dur); });

  // counters: the value under the pointer
  counters.forEach(function (k) {
    k.cv.addEventListener('mousemove', function (e) {
      var p = localXY(e, k.cv);
      if (p[0] < LABEL_W || !k.t.length) { hideTip(); return; }
      var t = T(p[0]), lo = 0, hi = k.t.length - 1;
      while (lo < hi) { var mid = (lo + hi) >> 1; if (k.t[mid] < t) lo = mid + 1; else hi = mid; }
      if (lo > 0 && t - k.t[lo - 1] < k.t[lo] - t) lo--;
      showTip(e, [text('b', '', k.c.name), line('value', fmtNum(k.v[lo]) + (k.c.unit ? ' ' + k.c.unit : '')),
        line('at', fmtDur(k.t[lo])), line('samples', k.c.n + ' in the run')]);
    });
    k.cv.addEventListener('mouseleave', hideTip);
    k.cv.addEventListener('mousedown', function (e) { beginDrag(e, e.shiftKey ? 'range' : 'pan', canvas); });
  });

  // ---- the selected span: its statistics and its children ----
  var panel = document.getElementById('selection');
  function select(s) {
    selected = s;
    redraw();
    if (!panel) return;
    panel.textContent = '';
    if (s < 0) { panel.hidden = true; return; }
    panel.hidden = false;
    var name = names[nk[s]];
    panel.appendChild(text('h3', '', name));
    var facts = text('table', 'facts');
    var body = facts.appendChild(document.createElement('tbody'));
    function row(k, v) {
      var tr = body.appendChild(document.createElement('tr'));
      tr.appendChild(text('th', '', k));
      tr.appendChild(text('td', '', v));
    }
    row('thread', threadName(th[s]) + ' (tid ' + D.threads[th[s]].tid + ')');
    row('start', fmtDur(st[s]));
    row('duration', fmtDur(du[s]));
    row('self', fmtDur(du[s] - ch[s]));
    var md = meta.get(s);
    if (md) Object.keys(md).forEach(function (key) { row(key, md[key]); });
    var stat = D.stats[name];
    if (stat) row('all ' + name, [stat[0] + ' calls'].concat(D.stat_cols.map(function (c, i) {
      return c.toLowerCase() + ' ' + fmtDur(stat[i + 1] * 1e9);
    })).join(', '));
    panel.appendChild(facts);
    // children: the spans one level deeper on its thread, within it, by name
    var r = rows[rowOf.get(th[s] * 65536 + dp[s] + 1)], kids = new Map();
    if (r) for (var q = firstEndingAfter(r, st[s]); q < r.idx.length; q++) {
      var c = r.idx[q];
      if (st[c] >= st[s] + du[s]) break;
      var e = kids.get(nk[c]) || [0, 0];
      e[0]++;
      e[1] += du[c];
      kids.set(nk[c], e);
    }
    if (kids.size) {
      var kt = text('table', 'facts'), kb = kt.appendChild(document.createElement('tbody'));
      var hr = kb.appendChild(document.createElement('tr'));
      ['child', 'count', 'time', 'share'].forEach(function (h) { hr.appendChild(text('th', '', h)); });
      Array.from(kids.entries()).sort(function (a, b) { return b[1][1] - a[1][1]; }).slice(0, 20).forEach(function (e2) {
        var tr = kb.appendChild(document.createElement('tr'));
        tr.appendChild(text('td', '', names[e2[0]]));
        tr.appendChild(text('td', '', String(e2[1][0])));
        tr.appendChild(text('td', '', fmtDur(e2[1][1])));
        tr.appendChild(text('td', '', (100 * e2[1][1] / du[s]).toFixed(1) + '%'));
      });
      panel.appendChild(kt);
    } else {
      panel.appendChild(text('p', 'note', 'No section nested in it.'));
    }
    var zoom = text('button', '', 'Zoom to it');
    zoom.type = 'button';
    zoom.addEventListener('click', function () { setView(st[s] - du[s] * 0.05, st[s] + du[s] * 1.05); });
    panel.appendChild(zoom);
    if (flame && flame.scopeOf(name)) flame.show(name);
  }

  // ---- the step breakdown ----
  var bd = document.getElementById('step-breakdown');
  if (bd && D.breakdown && D.steps.length) stepBreakdown(bd);
  function stepBreakdown(box) {
    var B = D.breakdown, cv = document.createElement('canvas'), H = 170;
    box.appendChild(cv);
    var lg = text('div', 'legend');
    var cols = B.names.map(function (k) { return colour[k]; }).concat(['#c6ccd2']);
    B.names.map(function (k) { return names[k]; }).concat(['other']).forEach(function (nm, q) {
      var it = text('span', 'item'), sw = text('span', 'sw');
      sw.style.background = cols[q];
      it.appendChild(sw);
      it.appendChild(document.createTextNode(nm));
      lg.appendChild(it);
    });
    box.appendChild(lg);
    var max = 1;
    B.ns.forEach(function (v, q) {
      var sum = v.reduce(function (a, b) { return a + b; }, 0);
      max = Math.max(max, sum, D.steps[q][2] - D.steps[q][1]);
    });
    var step = niceStep(max / 4), top = Math.ceil(max / step) * step;
    function draw() {
      var W = box.clientWidth, pw = Math.max(50, W - LABEL_W - RIGHT);
      var c = sizeCanvas(cv, W, H), bw = pw / B.ns.length, base = H - 8;
      function Y(v) { return base - v / top * (base - 8); }
      c.clearRect(0, 0, W, H);
      c.font = '10.5px system-ui, sans-serif';
      c.textAlign = 'right';
      c.textBaseline = 'middle';
      for (var g = 0; g <= top + step * 1e-9; g += step) {
        var y = Math.round(Y(g)) + 0.5;
        c.strokeStyle = '#eaeef2';
        c.beginPath(); c.moveTo(LABEL_W, y); c.lineTo(LABEL_W + pw, y); c.stroke();
        c.fillStyle = '#59636e';
        c.fillText(fmtTick(g), LABEL_W - 4, Math.max(y, 6));
      }
      B.ns.forEach(function (v, q) {
        var x = LABEL_W + q * bw, w = Math.max(1, bw > 3 ? bw - 1 : bw), acc2 = 0;
        v.forEach(function (ns, k) {
          if (!ns) return;
          c.fillStyle = cols[k];
          c.fillRect(x, Y(acc2 + ns), w, Y(acc2) - Y(acc2 + ns));
          acc2 += ns;
        });
        var sd = D.steps[q][2] - D.steps[q][1];
        c.strokeStyle = '#1f2328';
        c.strokeRect(x + 0.5, Y(sd) + 0.5, Math.max(0, w - 1), base - Y(sd));
      });
      cv.onmousemove = function (e) {
        var p = localXY(e, cv), q = Math.floor((p[0] - LABEL_W) / bw);
        if (q < 0 || q >= B.ns.length) { hideTip(); return; }
        var out = [text('b', '', 'step ' + D.steps[q][0]), line('step', fmtDur(D.steps[q][2] - D.steps[q][1]))];
        B.ns[q].forEach(function (ns, k) {
          if (ns) out.push(line(k < B.names.length ? names[B.names[k]] : 'other', fmtDur(ns)));
        });
        showTip(e, out);
      };
      cv.onmouseleave = hideTip;
      cv.onclick = function (e) {
        var q = Math.floor((localXY(e, cv)[0] - LABEL_W) / bw);
        if (q >= 0 && q < D.steps.length) setView(D.steps[q][1], D.steps[q][2]);
      };
    }
    box.drawBreakdown = draw;
  }

  // ---- the flame graph of the CPU samples ----
  var flame = D.profile ? flameGraph(document.getElementById('flame'), document.getElementById('flame-scope')) : null;
  function flameGraph(box, scopeSel) {
    if (!box) return null;
    var P = D.profile, cv = document.createElement('canvas'), root = null, focus = null, nodes = [];
    box.appendChild(cv);
    var sections = new Map();
    P.sections.forEach(function (s) { sections.set(s.name, s); });
    var off = false;          // the off-CPU scope: P.off's stacks, their time in ns
    function build(pairs, stacks) {   // [stack index, count or ns]...
      var r = { f: -1, v: 0, kids: new Map(), parent: null };
      pairs.forEach(function (p) {
        var node = r, fr = stacks[p[0]];
        r.v += p[1];
        for (var q = 0; q < fr.length; q++) {
          var next = node.kids.get(fr[q]);
          if (!next) { next = { f: fr[q], v: 0, kids: new Map(), parent: node }; node.kids.set(fr[q], next); }
          next.v += p[1];
          node = next;
        }
      });
      return r;
    }
    var total = P.counts.map(function (c, q) { return [q, c]; });
    function show(scope, offScope) {
      var s = scope && !offScope ? sections.get(scope) : null, pairs = [];
      if (s) for (var q = 0; q < s.stacks.length; q += 2) pairs.push([s.stacks[q], s.stacks[q + 1]]);
      off = !!(offScope && P.off);
      root = off ? build(P.off.stack_ns.map(function (v, q) { return [q, v]; }), P.off.stacks)
                 : build(s ? pairs : total, P.stacks);
      focus = root;
      if (scopeSel) {
        scopeSel.value = off ? '' : scope || '';
        if (off) scopeSel.selectedIndex = scopeSel.options.length - 1;
      }
      draw();
    }
    if (scopeSel) {
      var o = text('option', '', 'all samples (' + P.samples + ')');
      o.value = '';
      scopeSel.appendChild(o);
      P.sections.forEach(function (s) {
        var e = text('option', '', 'in section ' + s.name + ' (' + s.samples + ')');
        e.value = s.name;
        scopeSel.appendChild(e);
      });
      if (P.off) {   // last: where the threads were blocked in the kernel, by time
        var oo = text('option', '', 'off-CPU time, blocked in the kernel (' + fmtDur(P.off.ns) + ')');
        oo.value = '';
        oo.dataset.off = '1';
        scopeSel.appendChild(oo);
      }
      scopeSel.addEventListener('change', function () {
        var o = scopeSel.options[scopeSel.selectedIndex];
        show(scopeSel.value, o && o.dataset.off === '1');
      });
    }
    function depthOf(nd) {   // the levels below nd
      var d = 0;
      nd.kids.forEach(function (k) { d = Math.max(d, depthOf(k) + 1); });
      return d;
    }
    function draw() {
      var W = box.clientWidth, chain = [];
      for (var a = focus; a; a = a.parent) chain.unshift(a);
      var rowsN = chain.length + depthOf(focus);
      var H = Math.min(rowsN, 200) * FLAME_ROW;
      var c = sizeCanvas(cv, W, H);
      c.clearRect(0, 0, W, H);
      c.font = '11px system-ui, sans-serif';
      c.textBaseline = 'middle';
      nodes = [];
      function put(nd, x, w, y) {
        if (w < 0.5 || y >= H) return;
        var nm = nd.f < 0 ? 'all' : P.funcs[nd.f];
        var h = 0;
        for (var q = 0; q < nm.length; q++) h = (h * 31 + nm.charCodeAt(q)) | 0;
        c.fillStyle = nd.f < 0 ? '#8c959f' : 'hsl(' + (10 + (Math.abs(h) % 45)) + ',75%,' + (58 + Math.abs(h >> 8) % 14) + '%)';
        c.fillRect(x, y, Math.max(0.5, w - 0.5), FLAME_ROW - 1);
        nodes.push([x, y, w, nd]);
        if (w > 30) {
          c.fillStyle = '#1f2328';
          var t = nm, tw = c.measureText(t).width;
          if (tw > w - 6) t = t.slice(0, Math.max(1, Math.floor(t.length * (w - 6) / tw) - 1)) + '\u2026';
          c.fillText(t, x + 3, y + FLAME_ROW / 2);
        }
        var cx = x;
        Array.from(nd.kids.values()).sort(function (p, q) { return q.v - p.v; }).forEach(function (k) {
          var kw = w * k.v / nd.v;
          put(k, cx, kw, y + FLAME_ROW);
          cx += kw;
        });
      }
      chain.forEach(function (a, q) {   // the focus's callers, full width
        if (a === focus) return;
        var nm = a.f < 0 ? 'all' : P.funcs[a.f];
        c.fillStyle = '#d0d7de';
        c.fillRect(0, q * FLAME_ROW, W, FLAME_ROW - 1);
        c.fillStyle = '#1f2328';
        c.fillText(nm, 3, q * FLAME_ROW + FLAME_ROW / 2);
        nodes.push([0, q * FLAME_ROW, W, a]);
      });
      put(focus, 0, W, (chain.length - 1) * FLAME_ROW);
    }
    function at(e) {
      var p = localXY(e, cv);
      for (var q = nodes.length - 1; q >= 0; q--) {
        var nd = nodes[q];
        if (p[0] >= nd[0] && p[0] < nd[0] + nd[2] && p[1] >= nd[1] && p[1] < nd[1] + FLAME_ROW) return nd[3];
      }
      return null;
    }
    cv.addEventListener('mousemove', function (e) {
      var nd = at(e);
      if (!nd) { hideTip(); return; }
      showTip(e, [text('b', '', nd.f < 0 ? 'all' : P.funcs[nd.f]), off
        ? line('off-CPU', fmtDur(nd.v) + ' (' + (100 * nd.v / root.v).toFixed(1) + '% of the time blocked)')
        : line('samples', nd.v + ' (' + (100 * nd.v / root.v).toFixed(1) + '% of these, ' + fmtDur(nd.v * 1e9 / (P.hz || 1)) + ' of CPU)')]);
    });
    cv.addEventListener('mouseleave', hideTip);
    cv.addEventListener('click', function (e) { var nd = at(e); if (nd) { focus = nd; draw(); } });
    show('');
    return { show: show, draw: draw, scopeOf: function (nm) { return sections.has(nm); },
             offCpu: function () { return off ? root.v : -1; } };
  }

  // ---- start ----
  window.addEventListener('resize', function () {
    redraw();
    if (bd && bd.drawBreakdown) bd.drawBreakdown();
    if (flame) flame.draw();
  });
  drawAll();
  if (bd && bd.drawBreakdown) bd.drawBreakdown();
  window.sondeReport = {
    view: function () { return [v0, v1]; },
    setView: setView,
    drawNow: drawAll,   // what a zoom or pan redraws, at once (bench/bench_html.js times it)
    // the time (ns) the flame graph shows when its off-CPU scope is selected, else -1
    flameOffCpu: function () { return flame ? flame.offCpu() : -1; },
    duration: dur,
    // the client point at the middle of the widest span of that name (any, without one) now in
    // view, or null
    locate: function (name) {
      var best = -1, bw = 0;
      rows.forEach(function (r) {
        if (r.kind !== 'spans') return;
        for (var q = firstEndingAfter(r, v0); q < r.idx.length; q++) {
          var s = r.idx[q];
          if (st[s] > v1) break;
          if (name && names[nk[s]] !== name) continue;
          var w = Math.min(X(st[s] + du[s]), LABEL_W + plotW) - Math.max(X(st[s]), LABEL_W);
          if (w > bw) { bw = w; best = s; }
        }
      });
      if (best < 0) return null;
      var b = canvas.getBoundingClientRect(), k2 = rowOf.get(th[best] * 65536 + dp[best]);
      var x0 = Math.max(X(st[best]), LABEL_W), x1 = Math.min(X(st[best] + du[best]), LABEL_W + plotW);
      return { x: b.left + (x0 + x1) / 2, y: b.top + k2 * ROW_H + ROW_H / 2, name: names[nk[best]] };
    }
  };
  document.body.setAttribute('data-ready', '1');

  // ---- the statistics table: sorted by the clicked column (numbers by data-v) ----
  function sortableTables() {
    document.querySelectorAll('table.sortable th').forEach(function (h, col) {
      h.addEventListener('click', function () {
        var tb = h.closest('table').tBodies[0];
        var all = Array.prototype.slice.call(tb.rows), num = h.dataset.type === 'num';
        var dir = h.dataset.dir === 'asc' ? -1 : 1;
        h.dataset.dir = dir === 1 ? 'asc' : 'desc';
        all.sort(function (a, b) {
          var x = a.cells[col], y = b.cells[col];
          if (num) return dir * (parseFloat(y.dataset.v) - parseFloat(x.dataset.v));
          return dir * x.textContent.localeCompare(y.textContent);
        });
        all.forEach(function (r) { tb.appendChild(r); });
      });
    });
  }
}());
