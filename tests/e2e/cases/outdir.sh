# outdir.sh - the e2e case `outdir`, sourced by run.sh (index: README.md), which gives it
# $work (its folder, removed at the end), $build, $src, $sonde, $asan and the helpers check,
# fail and expect; it exits non-zero at the first failure, 77 when it cannot run here.
# shellcheck shell=bash
# In a sticky world-writable directory (/tmp) another user's symlink or directory on the way
# to the output directory is never used, whatever fs.protected_symlinks says: a root program
# with the default ./sonde-out would write its reports where the link points
if [ "$(id -u)" != 0 ]; then
    [ "${CI:-}" = true ] && fail "outdir needs root to plant another user's entries (CI runs as root)"
    echo "SKIP: outdir needs root to plant another user's symlink"
    exit 77
fi
cd "$work"
mkdir shared secret && chmod 1777 shared && chmod 700 secret
echo precious > secret/pipeline.json
ln -s ../secret shared/sonde-out && chown -h nobody shared/sonde-out
pipeline=("$build/examples/pipeline" --steps 2 --blocks 2 --frames 4 --dim 32 --quiet)
(cd shared && expect 1 "sonde-out is a symlink owned by uid $(id -u nobody) in a sticky world-writable directory" \
    "${pipeline[@]}") || exit 1
[ "$(ls secret)" = pipeline.json ] && [ "$(cat secret/pipeline.json)" = precious ] ||
    fail "the run wrote through another user's symlink: $(ls secret)"
# a directory another user made there: refused too (they could swap it for a link)
mkdir shared/theirs && chown nobody shared/theirs
(cd shared && expect 1 "theirs is a directory owned by uid" env SONDE_OUTPUT_DIR=theirs/out \
    "${pipeline[@]}") || exit 1
[ -z "$(ls shared/theirs)" ] || fail "the run wrote into another user's directory: $(ls shared/theirs)"
# with the flight recorder, refused at the start too (not only when a dump comes); sonde
# export goes through the same walk
(cd shared && expect 1 "cannot create output directory ./sonde-out: ./sonde-out is a symlink" \
    env SONDE_FLIGHT_RECORDER_S=5 SONDE_TRIGGER_SECTION_OVER_S="denoise_step=0.000001" \
    "${pipeline[@]}") || exit 1
"${pipeline[@]}" --name mine > /dev/null
expect 2 "shared/sonde-out is a symlink owned by uid" "$sonde" export sonde-out/mine.sonde \
    --format json -o shared/sonde-out
[ "$(ls secret)" = pipeline.json ] || fail "a dump or export wrote through the link: $(ls secret)"
# the caller's own symlink, and root's, are followed as before
rm shared/sonde-out && ln -s ../secret shared/sonde-out
(cd shared && "${pipeline[@]}" --name ours) || fail "the caller's own symlink was refused"
[ -f secret/ours.json ] || fail "the caller's own symlink was not followed: $(ls secret)"
