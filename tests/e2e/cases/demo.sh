# demo.sh - the e2e case `demo`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
cd "$work"
"$build/examples/pipeline" --steps 6 --blocks 4 --frames 8 --dim 64 > out.txt
grep -q "sonde summary: pipeline" out.txt || fail "the demo printed no summary"
grep -q "sonde-out/pipeline.trace.json.gz" out.txt || fail "the demo did not list its files"
check demo sonde-out pipeline 6 4
# threads are told apart: the workers by the names the demo gave them, the main thread by the
# program's; sonde's sampler is not one of the program's threads
python3 - sonde-out/pipeline.json sonde-out/pipeline.trace.json.gz sonde-out/pipeline.txt <<'PY'
import gzip, json, sys
r = json.load(open(sys.argv[1]))
names = sorted(t["name"] for t in r["threads"] if t["sections"])
assert names == ["denoise-worker-0", "denoise-worker-1", "pipeline"], names
ev = json.load(gzip.open(sys.argv[2], "rt"))
tn = {e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
assert {"denoise-worker-0", "denoise-worker-1", "pipeline", "steps"} <= tn, tn
assert all(e["tid"] != 0 for e in ev if e.get("cat") == "session"), "a session on tid 0"
head = open(sys.argv[3]).readline()
assert ", 3 threads)" in head, head
PY
# nothing recorded is dropped: the run's metadata in every report, the diffusion records'
# timesteps, guidance and block memory, the units recorded in a session's sections
python3 - sonde-out/pipeline.json sonde-out/pipeline.txt sonde-out/pipeline.html sonde-out/pipeline.trace.json.gz <<'PY'
import gzip, json, sys
r, txt, html = json.load(open(sys.argv[1])), open(sys.argv[2]).read(), open(sys.argv[3]).read()
ev = json.load(gzip.open(sys.argv[4], "rt"))
assert r["run"]["metadata"] == {"model": "toy video diffusion", "latent": "4 blocks x 8 frames x 64"}, r["run"]["metadata"]
assert "Run metadata: model=toy video diffusion, latent=4 blocks x 8 frames x 64\n" in txt, txt
assert 'id="run-table"' in html and "<th>latent</th><td>4 blocks x 8 frames x 64</td>" in html
labels = [e["args"]["labels"] for e in ev if e.get("name") == "process_labels"]
assert labels and "model=toy video diffusion" in labels[0], labels
d = r["diffusion"]
assert d["steps"]["timesteps"] == [1000 * (1 - s / 6) for s in range(6)], d["steps"]["timesteps"]
assert d["steps"]["guidance_scales"] == [7.5] * 6 and d["steps"]["steps"] == list(range(6))
assert len(d["blocks"]["memory_mb"]) == 24 and all(m > 0 for m in d["blocks"]["memory_mb"])
assert "timesteps 1000 to 166.667, guidance 7.5" in txt and "peak block memory 0.004096 MB" in txt, txt
gen = [s for s in r["sessions"] if s["name"] == "generate"][0]
frames = [t for t in r["throughput"] if t["unit"] == r["run"]["unit"]][0]
assert gen["units"] == frames["units"] > 0, (gen["units"], frames)
PY
# a session's sections carry the samples that fell inside them, as the run's do
SONDE_CPU_INTERVAL_S=0.01 SONDE_OUTPUT_DIR=res "$build/examples/pipeline" --steps 12 --blocks 4 --frames 32 --dim 128 --quiet
python3 - res/pipeline.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
run = {s["name"]: s["resources"]["samples"] for s in r["sections"]}
sess = {x["name"]: x["resources"]["samples"] for s in r["sessions"] for x in s["sections"]}
assert sess == run, (sess, run)   # each name lives in one session here
assert max(run.values()) > 0, run
PY
# a second run never overwrites the first
"$build/examples/pipeline" --steps 2 --blocks 2 --frames 4 --dim 32 --quiet
[ -f sonde-out/pipeline-2.json ] || fail "second run with the same name was not suffixed"
check count sonde-out/pipeline.json denoise_step 6
check count sonde-out/pipeline-2.json denoise_step 2
# symlinks planted at the output paths are never followed, and files get 0644 less the umask
mkdir -p planted/sonde-out && cd planted
echo "precious" > victim.txt
ln -s ../victim.txt sonde-out/pipeline.json
(umask 027; "$build/examples/pipeline" --steps 2 --blocks 2 --frames 4 --dim 32 --quiet)
[ "$(cat victim.txt)" = precious ] || fail "a report was written through a planted symlink"
[ -f sonde-out/pipeline.json ] && [ ! -L sonde-out/pipeline.json ] || fail "pipeline.json is not a new regular file"
ln -s ../victim.txt sonde-out/planted.sonde
"$build/examples/pipeline" --steps 2 --blocks 2 --frames 4 --dim 32 --quiet --name planted
[ "$(cat victim.txt)" = precious ] || fail "the recording was written through a planted symlink"
[ -f sonde-out/planted-2.sonde ] || fail "a planted NAME.sonde did not move the run to NAME-2: $(ls sonde-out)"
for f in pipeline.json pipeline.sonde pipeline.html; do
    m=$(stat -c %a "sonde-out/$f"); [ "$m" = 640 ] || fail "$f has mode $m under umask 027, expected 640"
done
cd ..
