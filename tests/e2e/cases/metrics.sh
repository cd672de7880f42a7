# metrics.sh - the e2e case `metrics`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
cd "$work"
# issue 64: live metrics for Prometheus. tests/e2e/serving.c plants its totals; the endpoint is
# scraped directly (both formats), checked by promtool, and scraped by a real Prometheus server
# whose PromQL answers must be the planted values
if ! command -v prometheus > /dev/null || ! command -v promtool > /dev/null; then
    [ "${CI:-}" = true ] && fail "prometheus and promtool are missing (scripts/setup.sh test installs them)"
    echo "metrics: no prometheus here (apt-get install prometheus): skipped"; exit 77
fi
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port) steps=40
SONDE_METRICS_PORT=$port SONDE_FLUSH_INTERVAL_S=0.1 "$build/tests/serving" out $steps stop > serving.out 2> serving.err &
served=$!
for _ in $(seq 100); do grep -q ready serving.out && break; sleep 0.1; done
grep -q ready serving.out || { touch stop; fail "serving did not start: $(cat serving.err)"; }
python3 "$src/tests/e2e/metrics_check.py" scrape "$port" $steps page.txt ||
    { touch stop; fail "the endpoint's page"; }
promtool check metrics < page.txt > promtool.out 2>&1 ||
    { touch stop; fail "promtool check metrics: $(cat promtool.out)"; }
# a second profiler asking for the same port: said, and it profiles on
SONDE_METRICS_PORT=$port "$build/tests/serving" second 2 stop2 > second.out 2> second.err &
second=$!
for _ in $(seq 100); do grep -q ready second.out && break; sleep 0.1; done
touch stop2
wait $second || { touch stop; fail "a profiler refused the port exited $?: $(cat second.err)"; }
grep -q "metrics_port $port: cannot listen on 127.0.0.1 port $port: Address already in use" second.err ||
    { touch stop; fail "the refused port was not said: $(cat second.err)"; }
check count second/serving.json decode 8
grep -q "cannot listen on 127.0.0.1 port $port" second/serving.json ||
    { touch stop; fail "the report's warnings lack the refused port"; }
# a real Prometheus server scraping it every second on loopback
pport=$(free_port)
cat > prometheus.yml <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: serving
    static_configs:
      - targets: ["127.0.0.1:$port"]
YML
prometheus --config.file=prometheus.yml --storage.tsdb.path=tsdb \
    --web.listen-address=127.0.0.1:$pport > prometheus.log 2>&1 &
prom=$!
python3 "$src/tests/e2e/metrics_check.py" prometheus "$pport" $steps ||
    { kill $prom; touch stop; fail "PromQL through Prometheus: $(tail -5 prometheus.log)"; }
kill $prom; wait $prom 2> /dev/null || true
touch stop
wait $served || fail "serving exited $?: $(cat serving.err)"
check count out/serving.json decode $((4 * steps))
# bad values are refused with the key's rules
expect 2 "SONDE_METRICS_PORT: 70000 is out of range" env SONDE_METRICS_PORT=70000 "$sonde" run --quiet -o bad -- true
expect 2 "--metrics-port" "$sonde" run --quiet -o bad --metrics-port x -- true
# sonde run serves the program's process tree; the program's own profiler is not given the port
rport=$(free_port)
SONDE_METRICS_PORT=$port "$sonde" run --quiet -o sr --metrics-port "$rport" -- \
    "$build/tests/serving" srout 2 srstop > sr.out 2> sr.err &
run=$!
for _ in $(seq 100); do grep -q ready sr.out && break; sleep 0.1; done
python3 - "$rport" "$port" <<'PY' || { touch srstop; fail "sonde run --metrics-port"; }
import socket, sys, urllib.request
page = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
assert "sonde_process_rss_mib{" in page, page[:300]
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=2).close()
    sys.exit("the program under sonde run served SONDE_METRICS_PORT itself")
except ConnectionRefusedError:
    pass
print("sonde run --metrics-port: the process tree's figures served; the program serves none")
PY
touch srstop
wait $run || fail "sonde run --metrics-port exited $?: $(cat sr.err)"
