// report.test.js - sonde's HTML report in Debian's Chromium, driven by puppeteer-core
// (tests/browser/run.sh makes the pages and calls this).
//   node report.test.js DEMO.html ESCAPE.html SHOTS_DIR
// On the demo's report, at 900 and 1400 px: no console error; no horizontal overflow; the time
// axis has at least five labelled ticks; the thread rows carry distinct names; hovering a span
// shows its name; a wheel zoom over the timeline narrows the visible range and every counter
// chart follows; a drag pans; clicking a span selects it; the search box highlights by name;
// the flame graph is drawn and follows the selected section. A screenshot of each width is kept
// in SHOTS_DIR. On the report of hostile names: nothing they hold runs or becomes markup.
'use strict';
const path = require('path');
const chromium = require(path.join(__dirname, 'chromium.js'));

const [demo, hostile, shots] = process.argv.slice(2);
if (!demo || !hostile || !shots) {
  console.error('usage: node report.test.js DEMO.html ESCAPE.html SHOTS_DIR');
  process.exit(2);
}
const check = chromium.check;
const frame = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));

async function open(browser, file, width) {
  const page = await browser.newPage();
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('requestfailed', (r) => errors.push('request failed: ' + r.url()));
  page.on('request', (r) => { if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) errors.push('network: ' + r.url()); });
  await page.evaluateOnNewDocument(() => {
    window.__alerts = 0;
    window.alert = () => { window.__alerts++; };
  });
  await page.setViewport({ width, height: 1000 });
  await page.goto('file://' + path.resolve(file), { waitUntil: 'load' });
  await page.waitForSelector('body[data-ready="1"]', { timeout: 20000 });
  return { page, errors };
}

async function demoAt(browser, width) {
  const { page, errors } = await open(browser, demo, width);
  const w = ' at ' + width + ' px';
  const overflow = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
  check(overflow[0] <= overflow[1], 'no horizontal overflow' + w, overflow);

  const ticks = await page.$$eval('#time-axis .tick', (e) => e.map((x) => x.textContent.trim()));
  check(ticks.length >= 5 && ticks.every((t) => /^-?[0-9.]+ (s|ms|µs|ns)$/.test(t)), 'time axis: at least five labelled ticks' + w, ticks);

  const threads = await page.$$eval('.row-label[data-thread]', (e) => e.map((x) => x.textContent));
  check(threads.length >= 3 && new Set(threads).size === threads.length && threads.includes('denoise-worker-0'),
    'thread rows carry distinct names' + w, threads);

  // hover: the tooltip names the span under the pointer
  const at = await page.evaluate(() => window.sondeReport.locate('denoising'));
  check(at !== null, 'the span "denoising" is drawn' + w);
  if (at) {
    await page.mouse.move(at.x, at.y);
    const tip = await page.$eval('.tip', (e) => (e.hidden ? '' : e.textContent));
    check(tip.startsWith('denoising') && /duration/.test(tip) && /self/.test(tip), 'hovering a span shows its name, duration and self time' + w, tip);
  }

  // wheel zoom over the timeline: the range narrows around the pointer, the counters follow
  const before = await page.evaluate(() => window.sondeReport.view());
  const box = await (await page.$('#timeline-canvas')).boundingBox();
  await page.mouse.move(box.x + box.width * 0.6, box.y + 5);
  await page.mouse.wheel({ deltaY: -600 });
  await frame(page);
  const after = await page.evaluate(() => window.sondeReport.view());
  check(after[1] - after[0] < 0.7 * (before[1] - before[0]) && after[0] > before[0], 'a wheel zoom narrows the visible range' + w, { before, after });
  const followed = await page.evaluate(() => {
    const v = document.getElementById('timeline-view');
    const c = Array.from(document.querySelectorAll('.counter'));
    return [c.length, c.every((x) => x.dataset.t0 === v.dataset.t0 && x.dataset.t1 === v.dataset.t1)];
  });
  check(followed[0] >= 1 && followed[1], 'the counter charts follow the zoom' + w, followed);
  const ticks2 = await page.$$eval('#time-axis .tick', (e) => e.map((x) => x.textContent.trim()));
  check(ticks2.length >= 5 && ticks2.join() !== ticks.join(), 'the axis follows the zoom' + w, ticks2);

  // drag: pans by the distance moved
  await page.mouse.move(box.x + box.width * 0.5, box.y + 5);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.5 - 100, box.y + 5, { steps: 4 });
  await page.mouse.up();
  await frame(page);
  const panned = await page.evaluate(() => window.sondeReport.view());
  check(panned[0] > after[0] && Math.abs((panned[1] - panned[0]) - (after[1] - after[0])) < 1, 'a drag pans the view' + w, { after, panned });

  // click: the selection panel shows the span and its children
  await page.evaluate(() => window.sondeReport.setView(0, window.sondeReport.duration));
  await frame(page);
  const den = await page.evaluate(() => window.sondeReport.locate('denoising'));
  await page.mouse.click(den.x, den.y);
  await frame(page);
  const sel = await page.$eval('#selection', (e) => (e.hidden ? '' : e.textContent));
  check(sel.startsWith('denoising') && sel.includes('denoise_step'), 'clicking a span selects it and lists its children' + w, sel.slice(0, 200));
  // and its name's statistics: the duration columns of the table, p90 among them
  check(/calls, total .*, p50 .*, p90 .*, p99 /.test(sel), 'the selection panel shows the name\'s statistics, p90 included' + w, sel.slice(0, 400));

  // search: the names that match are counted and the rest are dimmed
  await page.type('#search', 'decode');
  await frame(page);
  const matches = await page.$eval('#view-range', (e) => e.dataset.matches);
  check(matches === '1', 'the search box finds the one "decode" section' + w, matches);

  // the flame graph of the CPU samples, and of the selected section
  const flame = await page.evaluate(() => {
    const c = document.querySelector('#flame canvas');
    const s = document.getElementById('flame-scope');
    return c ? [c.height, s.options.length, s.value] : null;
  });
  check(flame && flame[0] > 0 && flame[1] >= 2, 'the flame graph is drawn with its scopes' + w, flame);
  // where the run's off-CPU periods were followed (as root), its last scope draws them: the
  // time shown is the page's own total of them, and the tooltip speaks of time, not samples
  const off = await page.evaluate(() => {
    const d = JSON.parse(document.getElementById('sonde-data').textContent);
    if (!d.profile || !d.profile.off) return null;
    const s = document.getElementById('flame-scope');
    s.selectedIndex = s.options.length - 1;
    s.dispatchEvent(new Event('change'));
    const shown = window.sondeReport.flameOffCpu();
    const c = document.querySelector('#flame canvas');
    const want = d.profile.off.stack_ns.reduce((a, v) => a + v, 0);
    c.scrollIntoView({ block: 'center' });   // the mouse moves in the viewport
    const r = c.getBoundingClientRect();
    return [shown, want, c.height, s.options[s.selectedIndex].textContent, r.left + 20, r.top + 8];
  });
  if (off) {
    check(off[0] === off[1] && off[0] > 0 && off[2] > 0 && off[3].startsWith('off-CPU time'),
          'the flame graph\'s off-CPU scope draws the blocked time' + w, off);
    await page.mouse.move(off[4], off[5]);
    const tip = await page.$eval('.tip', (e) => e.textContent).catch(() => '');
    check(/off-CPU/.test(tip) && !/samples/.test(tip), 'the off-CPU flame graph\'s tooltip gives time' + w, tip);
    await page.evaluate(() => {   // back to the CPU samples for what follows
      const s = document.getElementById('flame-scope');
      s.selectedIndex = 0;
      s.dispatchEvent(new Event('change'));
    });
  } else if (process.getuid && process.getuid() === 0) {
    check(false, 'as root the demo\'s off-CPU periods are in the page' + w, off);
  }

  const legend = await page.$$eval('#legend .item', (e) => e.length);
  check(legend >= 5, 'the legend lists the names' + w, legend);

  check(errors.length === 0, 'no console error, no network request' + w, errors);
  await page.screenshot({ path: path.join(shots, 'html-report-' + width + '.png'), fullPage: true });
  await page.close();
}

chromium.run(async (browser) => {
  for (const width of [900, 1400]) await demoAt(browser, width);
  const { page, errors } = await open(browser, hostile, 1200);
  const h = await page.evaluate(() => [window.__alerts, document.querySelectorAll('img').length,
    document.querySelectorAll('script').length, document.body.textContent.includes('<script>alert(1)</script>')]);
  check(h[0] === 0 && h[1] === 0 && h[2] === 2, 'hostile names: no alert, no element made from them', h);
  check(h[3], 'hostile names: shown as text', h);
  const at = await page.evaluate(() => window.sondeReport.locate(null));
  if (at) {
    await page.mouse.move(at.x, at.y);
    const tip = await page.$eval('.tip', (e) => e.innerHTML);
    check(!/<img|<script/.test(tip), 'hostile names: the tooltip holds text only', tip);
  }
  check(errors.length === 0, 'hostile names: no console error', errors);
});
