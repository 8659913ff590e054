#!/usr/bin/env bash
# What preloading libmsgtrace costs a process that sends no message: Go runtime start, the
# rebinding of every loaded object, the exit handler. /bin/true alone vs preloaded, interleaved,
# best of 5 rounds of 40 runs each.
set -euo pipefail
source "$(dirname "$0")/env.sh"
lib=${1:-$MSGTRACE_ROOT/bin/libmsgtrace.so}
[ -f "$lib" ] || { echo "bench-startup: $lib missing (make build)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
runs=40
best_alone=999999999 best_pre=999999999
for round in 1 2 3 4 5; do
	t0=$(date +%s%N)
	for ((i = 0; i < runs; i++)); do /bin/true; done
	t1=$(date +%s%N)
	for ((i = 0; i < runs; i++)); do
		LD_PRELOAD=$lib MSGTRACE_QUIET=1 MSGTRACE_OUT=$out/t.json /bin/true
	done
	t2=$(date +%s%N)
	a=$(((t1 - t0) / runs / 1000)) p=$(((t2 - t1) / runs / 1000))
	((a < best_alone)) && best_alone=$a
	((p < best_pre)) && best_pre=$p
done
echo "bench-startup: /bin/true ${best_alone} us alone, ${best_pre} us preloaded: +$((best_pre - best_alone)) us per process"
