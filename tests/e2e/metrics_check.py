"""metrics_check.py - the live metrics endpoint (metrics_port) of tests/e2e/serving.c, for the
e2e case `metrics`.

    python3 metrics_check.py scrape PORT STEPS OUT
        scrapes http://127.0.0.1:PORT/metrics until the planted totals are there (at most
        20 s), in both formats; checks every planted value, the errors a wrong request gets;
        writes the Prometheus-format page to OUT (for promtool)
    python3 metrics_check.py prometheus PROM_PORT STEPS
        asks a Prometheus server that scrapes it, through its HTTP API, until its PromQL
        queries return the planted values (at most 60 s)
Prints a line per check; exits 1 with the failed assertion.
"""
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


def fetch(url, accept=None, method="GET"):
    req = urllib.request.Request(url, method=method)
    if accept:
        req.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


def samples(text):
    """{(name, frozenset(labels)): value} of a page."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$', line)
        assert m, "a line that is not a sample: %r" % line
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def get(s, name, **labels):
    want = dict(labels)
    for (n, ls), v in s.items():
        d = dict(ls)
        if n == name and all(d.get(k) == val for k, val in want.items()):
            return v
    return None


def planted(s, steps):
    return {
        ("sonde_section_calls_total", "request"): steps,
        ("sonde_section_calls_total", "prefill"): steps,
        ("sonde_section_calls_total", "decode"): 4 * steps,
        ("sonde_step_seconds_count", None): steps,
        ("sonde_throughput_units_total", "tokens"): 128 * steps,
        ("sonde_flops_total", None): 1e9 * steps,
    }


def value_of(s, key):
    name, sub = key
    if name == "sonde_section_calls_total":
        return get(s, name, section=sub)
    if name == "sonde_throughput_units_total":
        return get(s, name, unit=sub)
    return get(s, name)


def scrape(port, steps, out):
    url = "http://127.0.0.1:%d/metrics" % port
    deadline = time.time() + 20
    while True:
        status, ctype, text = fetch(url)
        s = samples(text)
        want = planted(s, steps)
        got = {k: value_of(s, k) for k in want}
        if got == want or time.time() > deadline:
            break
        time.sleep(0.2)
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4"), (status, ctype)
    assert got == want, ("the planted totals", got, want)
    print("scrape: %s" % ", ".join("%s%s %g" % (n, "{%s}" % sub if sub else "", v)
                                    for (n, sub), v in sorted(got.items(), key=str)))
    # every series carries the run's name; a decode took at least its 1 ms sleep
    assert all(dict(ls).get("run") == "serving" for _, ls in s), "a series without run=serving"
    assert get(s, "sonde_section_seconds_total", section="decode") >= 4 * steps * 0.001
    assert abs(get(s, "sonde_throughput_seconds_total", unit="tokens") - 0.01 * steps) < 1e-9
    le = {dict(ls)["le"]: v for (n, ls), v in s.items() if n == "sonde_step_seconds_bucket"}
    assert le["+Inf"] == steps and le["0.001"] == 0, le  # each step sleeps 5 ms
    assert get(s, "sonde_process_rss_mib") > 0 and get(s, "sonde_dropped_events_total") == 0
    print("scrape: every series labelled run=serving; decode seconds, histogram, RSS as planted")
    status, ctype, om = fetch(url, accept=OPENMETRICS)
    assert status == 200 and ctype.startswith("application/openmetrics-text"), (status, ctype)
    assert om.endswith("# EOF\n"), om[-40:]
    assert "# TYPE sonde_section_calls counter" in om and \
        "# TYPE sonde_section_calls_total counter" in text, "counter families"
    assert samples(om.replace("# EOF\n", "")).keys() == s.keys(), "the two formats' series"
    print("scrape: OpenMetrics when asked (counter families without _total, # EOF)")
    assert fetch(url.replace("/metrics", "/other"))[0] == 404
    assert fetch(url, method="POST")[0] == 405
    status, _, body = fetch(url, method="HEAD")
    assert status == 200 and body == "", (status, body[:40])
    print("scrape: 404 elsewhere, 405 for POST, HEAD without a body")
    with open(out, "w") as f:
        f.write(text)


def prometheus(port, steps):
    api = "http://127.0.0.1:%d/api/v1/query?query=" % port
    queries = {
        'sonde_section_calls_total{run="serving",section="decode"}': 4 * steps,
        'sonde_throughput_units_total{unit="tokens"}': 128 * steps,
        'sonde_step_seconds_count': steps,
        'sum(sonde_section_calls_total)': 6 * steps,
        'histogram_quantile(0.5, sonde_step_seconds_bucket)': None,
    }
    deadline = time.time() + 60
    got = {}
    while time.time() < deadline:
        got = {}
        for q in queries:
            try:
                status, _, body = fetch(api + urllib.parse.quote(q))
            except OSError:
                break
            r = json.loads(body) if status == 200 else {}
            res = r.get("data", {}).get("result", [])
            got[q] = float(res[0]["value"][1]) if res else None
        if all(got.get(q) is not None and (want is None or got[q] == want)
               for q, want in queries.items()):
            break
        time.sleep(0.5)
    for q, want in queries.items():
        assert got.get(q) is not None and (want is None or got[q] == want), (q, got.get(q), want)
    print("prometheus: %s" % "; ".join("%s = %g" % (q, got[q]) for q in queries))


def main():
    mode = sys.argv[1]
    if mode == "scrape":
        scrape(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    elif mode == "prometheus":
        prometheus(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit("metrics_check.py: unknown mode %s" % mode)


if __name__ == "__main__":
    main()
