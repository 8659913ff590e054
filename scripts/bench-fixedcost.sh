#!/usr/bin/env bash
# The fixed cost of tracing a process: a small gnustep-base program (testdata/gnustep/startup.m,
# 20-30 ms untraced on this VM) from exec to exit, untraced and preloaded with the library (the
# stream written as the program runs: MSGTRACE_OUT=*.mtrace, no conversion at exit), at the
# default selection (the app's own methods) and with MSGTRACE_METHODS=all; and, to tell the
# parts apart, loaded but not installed (a bad MSGTRACE_MIN_US turns tracing off after the
# library and its Go runtime started). Runs alternate (untraced, loaded, default, all,
# untraced, ...) so that a drift of the machine's speed hits all alike; the medians of the wall
# times and of the differences pair by pair are printed. The program stamps main's entry and
# return (STARTUP_STAMPS), which splits each run into before main, main and after main: the
# fixed cost is what tracing adds before main and after it; main's own time grows with the
# calls recorded (~1,200 at the default selection, ~59,000 with all), a per-call cost.
# With BASE, a second build (say, the last commit's) runs in the same rounds, for a before and
# after measured alike.
#   bench-fixedcost.sh [RUNS] [BIN] [BASE]   (RUNS: 30; BIN: bin, with libmsgtrace-preload.so)
set -euo pipefail
# the figures also go to docs/bench/fixedcost.md, dated, with the tree and the machine
source "$(dirname "$0")/bench-record.sh"
bench_record fixedcost "" "$0" "$@"
source "$(dirname "$0")/env.sh"
runs=${1:-30}
bin=${2:-$MSGTRACE_ROOT/bin}
base=${3:-}
for b in "$bin" $base; do
	for f in libmsgtrace.so libmsgtrace-preload.so; do
		[ -f "$b/$f" ] || { echo "bench-fixedcost: $b/$f missing (make build)" >&2; exit 1; }
	done
done
command -v gnustep-config >/dev/null || { echo "bench-fixedcost: gnustep-config missing (make setup)" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# in $dir: gnustep-config's flags hold -I., and the tree's objc/ would shadow <objc/runtime.h>
# shellcheck disable=SC2046
if ! (cd "$dir" && gcc -std=gnu11 $(gnustep-config --objc-flags) -w -o startup "$MSGTRACE_ROOT/testdata/gnustep/startup.m" \
	$(gnustep-config --base-libs) 2>cc.txt); then
	cat "$dir/cc.txt" >&2
	exit 1
fi
mkdir -p "$dir/home"
export HOME=$dir/home STARTUP_STAMPS=1
results=$dir/results.txt

# one run: its wall time and the three parts in microseconds (bash's clock around fork + exec +
# wait, the program's around main), as a line of the results: round, what ran, wall, before
# main, main, after main
run() {
	local round=$1 what=$2 t0 t1 in out
	shift 2
	t0=$EPOCHREALTIME
	"$@" >/dev/null 2>"$dir/stamps.txt"
	t1=$EPOCHREALTIME
	t0=${t0/./} t1=${t1/./}
	in=$(awk '$1 == "main" {print $2}' "$dir/stamps.txt")
	out=$(awk '$1 == "return" {print $2}' "$dir/stamps.txt")
	if [ -z "$in" ] || [ -z "$out" ]; then
		echo "bench-fixedcost: $what: the program did not run to the end" >&2
		cat "$dir/stamps.txt" >&2
		exit 1
	fi
	((round > 0)) && echo "$round $what $((t1 - t0)) $((in - t0)) $((out - in)) $((t1 - out))" >>"$results"
	return 0
}
# the three traced runs of one build: loaded (tracing off), default selection, all
traced() {
	local round=$1 b=$2 tag=$3
	run "$round" "${tag}loaded" env LD_PRELOAD="$b/libmsgtrace-preload.so" MSGTRACE_OUT="$dir/l.mtrace" MSGTRACE_MIN_US=off "$dir/startup"
	run "$round" "${tag}default" env LD_PRELOAD="$b/libmsgtrace-preload.so" MSGTRACE_OUT="$dir/t.mtrace" MSGTRACE_QUIET=1 "$dir/startup"
	run "$round" "${tag}all" env LD_PRELOAD="$b/libmsgtrace-preload.so" MSGTRACE_OUT="$dir/a.mtrace" MSGTRACE_QUIET=1 \
		MSGTRACE_METHODS=all "$dir/startup"
}
for ((i = 0; i < runs + 1; i++)); do # the first round warms the caches and is not counted
	run "$i" untraced env "$dir/startup" # through env as the others
	traced "$i" "$bin" ""
	[ -n "$base" ] && traced "$i" "$base" "base-"
done
echo "bench-fixedcost: startup.m, $runs rounds; medians, ms; in parentheses the median over the rounds"
echo "of each run minus the untraced run of its round"
# medians per kind of run: each figure alone, and its difference to the untraced run's
awk -v base="$base" '
function median(a, n,   i, j, t) {
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ for (k = 3; k <= 6; k++) v[$2, $1, k] = $k; rounds[$1] = 1; kinds[$2] = 1 }
END {
	order = "untraced loaded default all base-loaded base-default base-all"
	split(order, ks, " ")
	name["untraced"] = "untraced"; name["loaded"] = "loaded, tracing off"
	name["default"] = "traced, default selection"; name["all"] = "traced, MSGTRACE_METHODS=all"
	printf "  %-32s %16s %16s %16s %16s %8s\n", "", "whole process", "before main", "main", "after main", "fixed"
	for (x = 1; x <= 7; x++) {
		kd = ks[x]
		if (!(kd in kinds)) continue
		if (kd == "base-loaded") printf "  %s, same rounds:\n", base
		label = kd; sub(/^base-/, "", label)
		line = sprintf("  %-32s", name[label])
		for (k = 3; k <= 6; k++) {
			n = 0; m = 0
			for (r in rounds) { a[++n] = v[kd, r, k] / 1000; d[++m] = (v[kd, r, k] - v["untraced", r, k]) / 1000 }
			if (kd == "untraced") line = line sprintf(" %16.1f", median(a, n))
			else line = line sprintf(" %7.1f (%+5.1f)", median(a, n), median(d, m))
		}
		if (kd != "untraced") { # before and after main, over untraced, round by round
			m = 0
			for (r in rounds) d[++m] = (v[kd, r, 4] + v[kd, r, 6] - v["untraced", r, 4] - v["untraced", r, 6]) / 1000
			line = line sprintf(" %+8.1f", median(d, m))
		}
		print line
	}
}' "$results"
