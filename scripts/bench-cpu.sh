#!/usr/bin/env bash
# What sampling each thread's CPU time costs (MSGTRACE_CPU, drain_cpu.c): a gnustep-base program
# whose THREADS threads run and sleep by turns (testdata/gnustep/cputhreads.m: rounds of 200
# sends then a 2 ms sleep, so every thread's counters move between two samples), traced with
# MSGTRACE_CPU=0 and =1, alternated run by run so that a drift of the machine's speed hits both
# alike. Prints the medians of the wall time and of the process's CPU time (user + sys) of each,
# their ratios (sampling on over off, pair by pair), and the library's own count of the cost
# (MSGTRACE_VERBOSE: thread reads, and the drain's CPU time in them: the cost per sample per
# thread).
#   bench-cpu.sh [RUNS] [THREADS] [ROUNDS] [BIN]   (10 pairs, 64 threads, 300 rounds, bin)
set -euo pipefail
# the figures also go to docs/bench/cpu.md, dated, with the tree and the machine
source "$(dirname "$0")/bench-record.sh"
bench_record cpu "" "$0" "$@"
source "$(dirname "$0")/env.sh"
runs=${1:-10}
threads=${2:-64}
rounds=${3:-300}
bin=${4:-$MSGTRACE_ROOT/bin}
for f in libmsgtrace.so libmsgtrace-preload.so; do
	[ -f "$bin/$f" ] || { echo "bench-cpu: $bin/$f missing (make build)" >&2; exit 1; }
done
command -v gnustep-config >/dev/null || { echo "bench-cpu: gnustep-config missing (make setup)" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# in $dir: gnustep-config's flags hold -I., and the tree's objc/ would shadow <objc/runtime.h>
# shellcheck disable=SC2046
if ! (cd "$dir" && gcc -std=gnu11 $(gnustep-config --objc-flags) -w -o cputhreads "$MSGTRACE_ROOT/testdata/gnustep/cputhreads.m" \
	$(gnustep-config --base-libs) 2>cc.txt); then
	cat "$dir/cc.txt" >&2
	exit 1
fi
mkdir -p "$dir/home"
export HOME=$dir/home CPU_THREADS=$threads CPU_ROUNDS=$rounds MSGTRACE_VERBOSE=1
results=$dir/results.txt

# one run: wall, user and sys seconds of the process (bash's time keyword), and the library's
# count (thread reads, ms of the drain's CPU time) when sampling was on
run() {
	local round=$1 cpu=$2 t
	TIMEFORMAT='%R %U %S'
	t=$( { time MSGTRACE_CPU=$cpu MSGTRACE_OUT=$dir/t.mtrace LD_PRELOAD=$bin/libmsgtrace-preload.so "$dir/cputhreads" \
		>/dev/null 2>"$dir/err.txt"; } 2>&1)
	local cost
	cost=$(awk '/CPU time sampled/ {print $5, $9}' "$dir/err.txt")
	echo "$round $cpu $t ${cost:-0 0}" >>"$results"
}

for ((i = 0; i < runs; i++)); do
	if ((i % 2)); then
		run "$i" 1
		run "$i" 0
	else
		run "$i" 0
		run "$i" 1
	fi
done

awk -v threads="$threads" -v rounds="$rounds" '
function median(a, n,   i, j, t) {
	for (i = 1; i <= n; i++)
		for (j = i + 1; j <= n; j++)
			if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	wall[$1, $2] = $3; cpu[$1, $2] = $4 + $5
	if ($2 == 1) { reads += $6; ms += $7 }
	n = $1 + 1 > n ? $1 + 1 : n
}
END {
	for (i = 0; i < n; i++) {
		w0[i + 1] = wall[i, 0]; w1[i + 1] = wall[i, 1]; c0[i + 1] = cpu[i, 0]; c1[i + 1] = cpu[i, 1]
		rw[i + 1] = wall[i, 1] / wall[i, 0]; rc[i + 1] = cpu[i, 1] / cpu[i, 0]
	}
	printf "%d threads, %d rounds each, %d pairs alternated (medians)\n", threads, rounds, n
	printf "  MSGTRACE_CPU=0  wall %.3f s  cpu %.3f s\n", median(w0, n), median(c0, n)
	printf "  MSGTRACE_CPU=1  wall %.3f s  cpu %.3f s\n", median(w1, n), median(c1, n)
	printf "  on/off pair by pair: wall %.3fx  cpu %.3fx\n", median(rw, n), median(rc, n)
	if (reads > 0)
		printf "  sampling: %d thread reads, %.1f ms of the drain'"'"'s CPU time: %.0f ns a thread a sample\n", reads, ms, ms * 1e6 / reads
}' "$results"
