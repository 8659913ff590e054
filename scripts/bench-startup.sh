#!/usr/bin/env bash
# What preloading costs a process that sends no message: /bin/true alone, preloaded with the
# preload loader (libmsgtrace-preload.so: one pass over the objects' relocations, nothing else),
# and preloaded with the Go library itself (libmsgtrace.so: the Go runtime starts in every
# process). Interleaved, best of 5 rounds of 40 runs each, in one run.
set -euo pipefail
# the figures also go to docs/bench/startup.md, dated, with the tree and the machine
source "$(dirname "$0")/bench-record.sh"
bench_record startup "" "$0" "$@"
source "$(dirname "$0")/env.sh"
bin=${1:-$MSGTRACE_ROOT/bin}
for f in libmsgtrace.so libmsgtrace-preload.so; do
	[ -f "$bin/$f" ] || { echo "bench-startup: $bin/$f missing (make build)" >&2; exit 1; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
runs=40
declare -A best=([alone]=999999999 [loader]=999999999 [golib]=999999999)
time_runs() { # name, then the environment for each run
	local name=$1
	shift
	local t0 t1 us
	t0=$(date +%s%N)
	for ((i = 0; i < runs; i++)); do env "$@" /bin/true; done
	t1=$(date +%s%N)
	us=$(((t1 - t0) / runs / 1000))
	((us < best[$name])) && best[$name]=$us
	return 0
}
for round in 1 2 3 4 5; do
	time_runs alone MSGTRACE_QUIET=1
	time_runs loader LD_PRELOAD="$bin/libmsgtrace-preload.so" MSGTRACE_QUIET=1 MSGTRACE_OUT="$out/t.json"
	time_runs golib LD_PRELOAD="$bin/libmsgtrace.so" MSGTRACE_QUIET=1 MSGTRACE_OUT="$out/t.json"
done
echo "bench-startup: env /bin/true ${best[alone]} us alone; preloaded: libmsgtrace-preload.so ${best[loader]} us" \
	"(+$((best[loader] - best[alone])) us), libmsgtrace.so ${best[golib]} us (+$((best[golib] - best[alone])) us)"
