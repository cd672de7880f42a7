// bench_html.js - how long the HTML report of a large run takes to load and paint its timeline
// in headless Chromium (issue 21's target: 10^6 spans under 3 s, the file at most 30 MB).
//   node bench/bench_html.js REPORT.html
// The figure: from navigation start to the page's 'sonde-first-paint' mark (report.js sets it
// once the timeline, its axis and the counter charts are drawn). The floor, measured in the
// same run: the same data block alone in a page whose only script parses it, the least any page
// carrying this data must do. Three loads each, the median printed.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const chromium = require(path.join(__dirname, '..', 'tests', 'browser', 'chromium.js'));

const report = process.argv[2];
if (!report) {
  console.error('usage: node bench/bench_html.js REPORT.html');
  process.exit(2);
}
const html = fs.readFileSync(report, 'utf8');
const m = html.match(/<script type="application\/json" id="sonde-data">([\s\S]*?)<\/script>/);
if (!m) {
  console.error(report + ': no sonde-data block');
  process.exit(1);
}
const spans = JSON.parse(m[1]).spans.n;
const floorFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'bench-html-')), 'floor.html');
fs.writeFileSync(floorFile, '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>' +
  '<script type="application/json" id="sonde-data">' + m[1] + '</script><script>' +
  'window.__d = JSON.parse(document.getElementById("sonde-data").textContent);' +
  'performance.mark("sonde-first-paint");document.body.setAttribute("data-ready","1");' +
  '</script></body></html>');

async function load(browser, file) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 1000 });
  await page.goto('file://' + path.resolve(file), { waitUntil: 'load', timeout: 120000 });
  await page.waitForSelector('body[data-ready="1"]', { timeout: 120000 });
  const ms = await page.evaluate(() => performance.getEntriesByName('sonde-first-paint')[0].startTime);
  let redraw = null;
  if (file === report) { // one redraw of the whole run, and of a hundredth of it, as a zoom makes
    redraw = await page.evaluate(() => {
      const r = window.sondeReport, t = (a, b) => {
        r.setView(a, b);
        const t0 = performance.now();
        r.drawNow();
        return performance.now() - t0;
      };
      return [t(0, r.duration), t(r.duration * 0.5, r.duration * 0.51)];
    });
  }
  await page.close();
  if (redraw) redraws.push(redraw);
  return ms;
}
const redraws = [];
const median = (v) => v.slice().sort((a, b) => a - b)[Math.floor(v.length / 2)];

(async () => {
  const browser = await chromium.launch();
  const paint = [], floor = [];
  try {
    for (let i = 0; i < 3; i++) {
      floor.push(await load(browser, floorFile));
      paint.push(await load(browser, report));
    }
  } finally {
    await browser.close();
    fs.rmSync(path.dirname(floorFile), { recursive: true, force: true });
  }
  const mb = fs.statSync(report).size / 1e6;
  console.log('html report, ' + spans + ' spans: first paint ' + (median(paint) / 1000).toFixed(2) +
    ' s (floor, the same data parsed by a page that draws nothing: ' + (median(floor) / 1000).toFixed(2) +
    ' s); the file ' + mb.toFixed(1) + ' MB. Targets: 3 s, 30 MB.');
  console.log('html report, ' + spans + ' spans: a redraw of the whole run ' + median(redraws.map((r) => r[0])).toFixed(1) +
    ' ms, of a hundredth of it ' + median(redraws.map((r) => r[1])).toFixed(1) + ' ms (a frame at 60 Hz: 16.7 ms)');
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
