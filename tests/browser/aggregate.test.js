// aggregate.test.js - `sonde aggregate --format html` in Debian's Chromium, driven by
// puppeteer-core (the e2e case `html` makes the page from tests/e2e/collective.c's three ranks,
// whose rank 1 is 20 ms late into every allreduce, and calls this).
//   node aggregate.test.js PAGE.html STRAGGLER SHOTS_DIR
// At 700 and 1300 px: no console error, no network request, no horizontal overflow; the verdict
// names the straggler; a bar a rank, the waiting ranks' red (wait) part drawn wider than the
// straggler's, each naming the straggler as its cause; the sections' table names the straggler
// slowest in forward and no other rank slower by 25% or more. A screenshot of each width is
// kept in SHOTS_DIR.
'use strict';
const path = require('path');
const chromium = require(path.join(__dirname, 'chromium.js'));

const [page_path, straggler, shots] = process.argv.slice(2);
if (!page_path || straggler === undefined || !shots) {
  console.error('usage: node aggregate.test.js PAGE.html STRAGGLER SHOTS_DIR');
  process.exit(2);
}
const check = chromium.check;

async function at(browser, width) {
  const page = await browser.newPage();
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('request', (r) => { if (!r.url().startsWith('file:')) errors.push('network: ' + r.url()); });
  await page.setViewport({ width, height: 900 });
  await page.goto('file://' + path.resolve(page_path), { waitUntil: 'load' });
  await page.waitForSelector('body[data-ready="1"]', { timeout: 20000 });
  const w = ' at ' + width + ' px';
  const overflow = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
  check(overflow[0] <= overflow[1], 'no horizontal overflow' + w, overflow);
  const verdict = await page.$eval('#waiting .verdict', (e) => [e.dataset.straggler, e.textContent]);
  check(verdict[0] === straggler && verdict[1].startsWith('Rank ' + straggler + ' is the straggler'),
    'the verdict names rank ' + straggler + w, verdict);
  const bars = await page.$$eval('#waiting .rank', (rows) => rows.map((r) => ({
    rank: r.dataset.rank,
    cause: r.dataset.cause,
    wait_px: r.querySelector('.wait').getBoundingClientRect().width,
    bar_px: r.querySelector('.bar').getBoundingClientRect().width,
  })));
  const slow = bars.find((b) => b.rank === straggler);
  const others = bars.filter((b) => b.rank !== straggler);
  check(bars.length >= 2 && slow && others.length === bars.length - 1, 'a bar a rank' + w, bars);
  check(slow && others.every((b) => b.wait_px > 4 * Math.max(slow.wait_px, 1) && b.cause === straggler),
    'the waiting ranks\' wait drawn, caused by rank ' + straggler + w, bars);
  check(bars.every((b) => b.bar_px > 0.3 * width), 'the bars take the page\'s width' + w, bars);
  const rows = await page.$$eval('#sections tbody tr', (trs) => trs.map((tr) => {
    const td = tr.querySelectorAll('td');
    return { name: td[0].textContent, slowest: td[6].dataset.rank, over: parseFloat(td[7].textContent) };
  }));
  const fwd = rows.find((r) => r.name === 'forward');
  check(fwd && fwd.slowest === straggler && fwd.over > 50, 'forward: rank ' + straggler + ' slowest' + w, fwd);
  check(rows.length >= 4 && rows.every((r) => r.slowest === straggler || r.over < 25),
    'no other rank named slower' + w, rows);
  check(errors.length === 0, 'no console error, no network request' + w, errors);
  await page.screenshot({ path: path.join(shots, 'html-aggregate-' + width + '.png'), fullPage: true });
  await page.close();
}

chromium.run(async (browser) => {
  for (const width of [700, 1300]) await at(browser, width);
});
