// chromium.js - Debian's Chromium, headless, through puppeteer-core: the one way the browser
// test (report.test.js) and the HTML benchmark (bench/bench_html.js) start it. CHROMIUM names
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
