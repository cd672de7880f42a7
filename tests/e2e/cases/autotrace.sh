# autotrace.sh - the e2e case `autotrace`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
cd "$work"
traced="$build/tests/traced"
counts() { # JSON -> "name=count" lines, sorted
    python3 -c 'import json, sys
for s in sorted(json.load(open(sys.argv[1]))["sections"], key=lambda s: s["name"]):
    print("%s=%d" % (s["name"], s["count"]))' "$1"
}
run_traced() { # NAME [VAR=VALUE...]: the automatic profiler, configured from the environment
    local name=$1; shift
    env SONDE_OUTPUT_DIR=out SONDE_NAME="$name" SONDE_FORMATS=json,trace SONDE_COLLECT_GPU=0 \
        SONDE_COLLECT_CPU=0 SONDE_COLLECT_MEMORY=0 "$@" "$traced" || fail "traced $name exited $?"
    counts "out/$name.json" > "$name.txt"
}
# every call: global and static functions, recursion, a thread, C++ names demangled
# (a template, a member, an exception unwinding through an instrumented frame), longjmp
run_traced all SONDE_AUTOTRACE_EXCLUDE='excluded_*' SONDE_WITH_STACK=1
cat > want.txt <<'TXT'
cpp_entry=1
double ns::twice<double>(double)=1
fast_leaf=1000
fib=25
helper_static=17
int ns::twice<int>(int)=4
jumper=1
jumper_inner=1
ns::Widget::run(int)=1
ns::thrower(int)=1
run=1
slow_step=1
worker=1
TXT
diff want.txt all.txt || fail "traced sections differ from the calls made"
python3 - out/all.trace.json.gz out/all.json <<'PY'
import gzip, json, sys
ev = json.load(gzip.open(sys.argv[1], "rt"))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev  # the object form: the run has CPU samples
leaf = [e for e in ev if e.get("name") == "fast_leaf"]
assert leaf and leaf[0]["args"]["file"].endswith("tests/autotrace/traced.c"), leaf[:1]
assert leaf[0]["args"]["line"] > 0 and leaf[0]["args"]["function"] == "fast_leaf", leaf[0]
r = json.load(open(sys.argv[2]))
helper = [s for s in r["sections"] if s["name"] == "helper_static"][0]
assert helper["threads"] == 2, helper  # main's and the worker's calls
print("autotrace: source file and line of static and C++ functions, 2 threads")
PY
# a library loaded with dlopen after tracing began: its functions, static too, are named
run_traced plugin TRACED_PLUGIN="$build/tests/libtraced_plugin.so" SONDE_AUTOTRACE_INCLUDE='plugin_*'
[ "$(cat plugin.txt | tr '\n' ' ')" = "plugin_static=2 plugin_work=1 " ] || fail "dlopen: $(cat plugin.txt)"
# include: only the named functions (by name)
run_traced inc SONDE_AUTOTRACE_INCLUDE='fib, worker'
[ "$(cat inc.txt | tr '\n' ' ')" = "fib=25 worker=1 " ] || fail "include: $(cat inc.txt)"
# exclude by source file: every function of traced_cpp.cpp goes
run_traced nocpp SONDE_AUTOTRACE_EXCLUDE='*traced_cpp.cpp'
grep -q "ns::\|cpp_entry" nocpp.txt && fail "exclude by file kept: $(cat nocpp.txt)"
grep -q "^fib=25$" nocpp.txt || fail "exclude by file: $(cat nocpp.txt)"
# maximum depth 3: run (1), fib (2), fib (3): 1 + 2 fib calls
run_traced deep SONDE_AUTOTRACE_MAX_DEPTH=3 SONDE_AUTOTRACE_INCLUDE='fib,run'
[ "$(cat deep.txt | tr '\n' ' ')" = "fib=3 run=1 " ] || fail "max depth: $(cat deep.txt)"
# and the reports say how many calls the limit left out (22 of fib's 25, at least)
python3 -c 'import json, re, sys
w = [x for x in json.load(open(sys.argv[1]))["warnings"] if "autotrace_max_depth (3)" in x]
assert len(w) == 1 and int(re.match(r"autotrace: (\d+) calls nested deeper", w[0]).group(1)) >= 22, w' out/deep.json ||
    fail "max depth: no warning in the report"
# minimum duration 1 ms: the 2 ms slow_step stays, the 1,000 sub-microsecond fast_leaf calls
# are left out and counted (a few may outlast 1 ms when the thread is preempted: TSan, a
# loaded machine)
run_traced short SONDE_MIN_DURATION_S=0.001 SONDE_AUTOTRACE_INCLUDE='slow_step,fast_leaf'
python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
kept = {s["name"]: s["count"] for s in r["sections"]}
out = r["summary"]["short_sections_left_out"]
assert kept.get("slow_step") == 1, kept
assert kept.get("fast_leaf", 0) + out == 1000 and out >= 980, (kept, out)' out/short.json \
    || fail "min duration: $(cat short.txt)"
# a program's own profiler, attached; after detach nothing more is traced
"$traced" attach out > attach.out || fail "traced attach exited $?"
grep -q "excluded 1 " attach.out || fail "attach: $(cat attach.out)"
counts out/attached.json > attached.txt
grep -v "^excluded" want.txt | diff - attached.txt || fail "attached profiler's sections differ"
# manual: no automatic profiler, no file
mkdir manual && (cd manual && SONDE_AUTOTRACE=manual "$traced") && [ -z "$(ls manual)" ] \
    || fail "SONDE_AUTOTRACE=manual still wrote $(ls manual)"
# hot calls' accounting (src/record/ftrace.h) on recursion and on a mostly-tiny function that
# sometimes does deep work: with hot calls counted and with every call recorded, one
# thread's self times add up to its traced time, no total exceeds it, a recursive function's
# total is its outermost calls', and the deep work is deep's, not check's (hot_s 100 us, not
# the default 1 us: under TSan a fib call takes over 1 us, and fib must be hot in every build)
for hot in default 0; do
    calls=(SONDE_AUTOTRACE_HOT_S=0.0001)
    [ $hot = 0 ] && calls=(SONDE_AUTOTRACE_HOT_CALLS=0)
    env SONDE_OUTPUT_DIR=out SONDE_NAME="shapes_$hot" SONDE_FORMATS=json SONDE_COLLECT_GPU=0 \
        SONDE_COLLECT_CPU=0 SONDE_COLLECT_MEMORY=0 "${calls[@]}" "$build/tests/shapes" \
        > /dev/null || fail "shapes $hot exited $?"
done
python3 - out/shapes_default.json out/shapes_0.json <<'PY' || fail "hot calls' accounting"
import json, sys
runs = [{s["name"]: s for s in json.load(open(f))["sections"]} for f in sys.argv[1:]]
roots = ("fib_rounds", "parity_rounds", "check_rounds")
for s, how in zip(runs, ("hot calls counted", "every call recorded")):
    traced = sum(s[r]["total_s"] for r in roots)
    selfs = sum(x["self_s"] for x in s.values())
    assert abs(selfs / traced - 1) < 0.01, (how, "self times sum to", selfs, "of", traced,
                                          {k: x["self_s"] for k, x in s.items()})
    for x in s.values():
        assert x["total_s"] <= traced * (1 + 1e-6) and x["self_s"] >= 0, (how, x)
    # a driver's children are its outermost calls: their totals and its self make its total
    for root, kids in (("fib_rounds", ["fib"]), ("parity_rounds", ["is_even", "spin"]),
                       ("check_rounds", ["check"])):
        parts = sum(s[k]["total_s"] for k in kids) + s[root]["self_s"]
        assert abs(parts / s[root]["total_s"] - 1) < 0.01, (how, root, parts, s[root])
    print("autotrace shapes %s: self times %.4f of the traced time; fib %.1f ms of fib_rounds' "
          "%.1f ms" % (how, selfs / traced, s["fib"]["total_s"] * 1e3,
                       s["fib_rounds"]["total_s"] * 1e3))
hot, every = runs
assert hot["fib"].get("aggregated_calls", 0) > 0 and hot["check"].get("aggregated_calls", 0) > 0, hot
share = lambda s, k: s[k]["self_s"] / s["check_rounds"]["total_s"]
# the deep work is deep_leaf's, not check's as well: check's own share is no larger with its
# calls counted than with each recorded (recording them puts the recording's cost in its self
# time; it was 0.98 of the run, the deep work's, with its calls counted). The two runs' shares
# of the deep work itself differ by preemption on a loaded machine (5.3 points seen): the
# in-run sums above are what hold it.
assert share(hot, "check") <= share(every, "check") + 0.05, (share(hot, "check"),
                                                            share(every, "check"))
PY
