// chromium.js - Debian's Chromium, headless, through puppeteer-core: the one way the browser
// tests (report.test.js, aggregate.test.js) and the HTML benchmark (bench/bench_html.js) start
// it; and the tests' checks (check, then done to print the verdict and exit). CHROMIUM names
// another binary. The flags keep it off this machine's closed network (no background fetches).
'use strict';
const path = require('path');
const puppeteer = require(path.join(__dirname, 'node_modules', 'puppeteer-core'));

exports.launch = () => puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});

// The browser tests' checks: each printed "ok" or "FAIL" with what it saw; done() prints how many
// failed and exits 1 when any did.
let failures = 0;
exports.check = (ok, what, detail) => {
  if (ok) {
    console.log('ok   ' + what);
  } else {
    failures++;
    console.log('FAIL ' + what + (detail !== undefined ? ': ' + JSON.stringify(detail) : ''));
  }
};
exports.done = () => {
  console.log(failures ? failures + ' check(s) failed' : 'all checks passed');
  process.exit(failures ? 1 : 0);
};

// A test's body run with a browser of its own, closed after it, then the verdict (done); an
// exception fails the test.
exports.run = (body) => (async () => {
  const browser = await exports.launch();
  try {
    await body(browser);
  } finally {
    await browser.close();
  }
  exports.done();
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
