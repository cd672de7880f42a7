# html.sh - the e2e case `html`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
# The HTML report in a real browser: headless Chromium loads it from disk, the test reads
# the DOM after load and the console, and keeps a screenshot in the build folder.
command -v chromium >/dev/null || fail "chromium is not installed (scripts/setup.sh test installs it)"
cd "$work"
# with CPU samples, for the flame graph
SONDE_SAMPLE_HZ=999 "$build/examples/pipeline" --steps 8 --blocks 4 --frames 8 --dim 1024 --quiet
"$build/tests/escape" "$work/sonde-out"
browse() { # page.html dom-out; a browser that fails to start is tried again (twice)
    for attempt in 1 2 3; do
        chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
            --disable-background-networking --disable-component-update --disable-sync \
            --user-data-dir="$work/profile$attempt" --enable-logging=stderr --v=0 \
            --virtual-time-budget=2000 --dump-dom "file://$1" > "$2" 2> "$2.log" || true
        grep -q 'data-ready="1"' "$2" && return 0   # parsed to the end, script ran
        echo "chromium attempt $attempt did not finish the page: $(tail -3 "$2.log")"
    done
}
browse "$work/sonde-out/pipeline.html" dom.html
browse "$work/sonde-out/escape.html" dom2.html
python3 - dom.html dom2.html sonde-out/pipeline.json <<'PY'
import json, re, sys
dom, dom2 = open(sys.argv[1]).read(), open(sys.argv[2]).read()
r = json.load(open(sys.argv[3]))
assert 'data-ready="1"' in dom and 'data-ready="1"' in dom2, "the page's script did not run"
for id_ in ["cards", "run-table", "recommendations", "timeline-view", "time-axis", "timeline-canvas", "stage-chart", "step-breakdown", "flame", "step-chart", "stats-table", "system-table", "config-table"]:
    assert 'id="%s"' % id_ in dom, "missing #" + id_
# the page carries every section, and the CPU samples, in its data block
data = json.loads(re.search(r'<script type="application/json" id="sonde-data">(.*?)</script>', dom, re.S).group(1))
assert data["spans"]["n"] == data["spans"]["total"] == r["summary"]["sections"], (data["spans"]["n"], r["summary"]["sections"])
assert sum(data["spans"]["d"]) > 0 and len(data["spans"]["t"]) == data["spans"]["n"]
assert data["profile"]["samples"] == r["profile"]["samples"] > 0, "no CPU samples for the flame graph"
names = {t["name"] for t in data["threads"]}
assert {"pipeline", "denoise-worker-0", "denoise-worker-1"} <= names, names
# the configuration is folded away, the run's metadata is at the top, microseconds are µs
assert '<details id="configuration"><summary>' in dom
assert dom.index('id="run-table"') < dom.index('id="recommendations"')
assert " us<" not in dom and " us " not in dom.split('id="sonde-data"')[0], "microseconds written us"
table = dom[dom.index('id="stats-table"'):]
table = table[:table.index("</table>")]
rows = re.findall(r"<tr><td>([^<]*)</td>", table)
assert sorted(rows) == sorted(s["name"] for s in r["sections"]), rows
assert len(data["counters"]) >= 1, "no counter chart"
# hostile names are text, never markup: no element was made from them
assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom2
assert "<script>alert(1)" not in dom2 and "<img src=" not in dom2
assert "&lt;img src=x onerror=alert(2)&gt;" in dom2
print("html report: %d sections in the page's data, %d table rows, escaping holds" % (data["spans"]["n"], len(rows)))
PY
for log in dom.html.log dom2.html.log; do
    if grep -E "Uncaught|CONSOLE.*(Error|error)" "$log"; then fail "script errors in the page ($log)"; fi
done
# sonde report writes the same page from the .sonde file
"$build/tools/sonde/sonde" report sonde-out/pipeline.sonde -o again.html > /dev/null
cmp -s again.html sonde-out/pipeline.html || fail "sonde report differs from the library's NAME.html"
# the page as an instrument, driven through puppeteer-core: tests/browser/report.test.js
[ -f "$src/tests/browser/node_modules/puppeteer-core/package.json" ] ||
    fail "puppeteer-core is not installed (scripts/setup.sh test installs it)"
node "$src/tests/browser/report.test.js" sonde-out/pipeline.html sonde-out/escape.html "$build/tests" ||
    fail "the HTML report in the browser (screenshots in $build/tests)"
# issue 62: sonde aggregate's page, the rank view of who waits for whom, on three forked ranks
# whose rank 1 is 20 ms late into every allreduce (tests/e2e/collective.c)
timeout 120 "$build/tests/collective" coll job 3 1 10 || fail "collective exited $?"
"$build/tools/sonde/sonde" aggregate coll --format html -o coll.html || fail "aggregate --format html exited $?"
node "$src/tests/browser/aggregate.test.js" coll.html 1 "$build/tests" ||
    fail "sonde aggregate's page in the browser (screenshots in $build/tests)"
# the page of a run with hostile names holds them as text only
"$build/tools/sonde/sonde" aggregate sonde-out/escape.sonde sonde-out/escape.sonde --format html \
    -o escagg.html 2> /dev/null || fail "aggregate --format html of hostile names exited $?"
python3 - escagg.html <<'PY' || fail "aggregate --format html: a hostile name became markup"
import re, sys
page = open(sys.argv[1]).read()
assert page.count("<script") == 0 and "<img" not in page, re.findall(r"<(?:script|img)[^>]*>", page)
assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page, "the hostile name is not shown as text"
print("aggregate --format html: hostile names shown as text")
PY
# a run of 10^6 sections: the page carries every one, in at most 30 MB (make bench times how
# soon Chromium paints it: bench/bench_html.js)
"$build/tests/manyspans" big many 1000000 || fail "manyspans exited $?"
python3 - big/many.html <<'PY' || fail "the HTML report of 10^6 sections"
import json, os, re, sys
size = os.path.getsize(sys.argv[1])
data = json.loads(re.search(r'<script type="application/json" id="sonde-data">(.*?)</script>', open(sys.argv[1]).read(), re.S).group(1))
assert data["spans"]["n"] == data["spans"]["total"] == 1000000, (data["spans"]["n"], data["spans"]["total"])
assert size <= 30 * 1000 * 1000, size
print("html report of 10^6 sections: %.1f MB, every section in it" % (size / 1e6))
PY
