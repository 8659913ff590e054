#!/usr/bin/env bash
# `make demo` on Linux: builds testdata/gnustep/demo.m (a little Foundation app: a run loop, a
# timer, collections, a sort that calls back into the app, a worker NSThread, and one 40 ms
# block on the main thread) with gcc against gnustep-base, and traces every method of the
# process (MSGTRACE_METHODS=all) under `msgtrace run`: every output format in the current
# directory, the streams in OUTDIR/streams, and the report's summary (top methods, hitches).
#   bash scripts/demo.sh [OUTDIR]    (default bin/demo; bin/msgtrace must be built)
set -euo pipefail
source "$(dirname "$0")/env.sh"
out=${1:-bin/demo}
mkdir -p "$out"
out=$(cd "$out" && pwd)
for tool in gcc gnustep-config; do
	command -v "$tool" >/dev/null || { echo "demo: $tool missing: run make setup (gobjc, libgnustep-base-dev)" >&2; exit 1; }
done
# gnustep-config's flags write dependency files (-MMD) next to the object: build in OUTDIR
(cd "$out" && gcc -std=gnu11 $(gnustep-config --objc-flags) -o demo "$MSGTRACE_ROOT/testdata/gnustep/demo.m" \
	$(gnustep-config --base-libs) -lpthread)
rm -rf "$out/streams"
MSGTRACE_METHODS=all "$MSGTRACE_ROOT/bin/msgtrace" run --out trace.json --perfetto trace.pftrace \
	--speedscope trace.speedscope.json --pprof trace.pb.gz --folded trace.folded --flame trace.svg \
	--streams "$out/streams" -- "$out/demo"
