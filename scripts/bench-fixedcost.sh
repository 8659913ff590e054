#!/usr/bin/env bash
# The fixed cost of tracing a process: a small gnustep-base program (testdata/gnustep/startup.m,
# ~50 ms, a few hundred calls) from exec to exit, untraced and preloaded with the library (the
# stream written as the program runs: MSGTRACE_OUT=*.mtrace, no conversion at exit), at the
# default selection (the app's own methods) and with MSGTRACE_METHODS=all; and, to tell the
# parts apart, loaded but not installed (a bad MSGTRACE_MIN_US turns tracing off after the
# library and its Go runtime started). Runs alternate (untraced, loaded, default, all,
# untraced, ...) so that a drift of the machine's speed hits all alike; the medians of the wall
# times and of the differences pair by pair are printed.
# With BASE, a second build (say, the last commit's) runs in the same rounds, for a before and
# after measured alike.
#   bench-fixedcost.sh [RUNS] [BIN] [BASE]   (RUNS: 30; BIN: bin, with libmsgtrace-preload.so)
set -euo pipefail
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
export HOME=$dir/home

# one run's wall time in microseconds (bash's clock around fork + exec + wait)
run_us() {
	local t0 t1
	t0=$EPOCHREALTIME
	"$@" >/dev/null 2>&1
	t1=$EPOCHREALTIME
	echo $(((${t1/./} - ${t0/./})))
}
# the three traced runs of one build: loaded (tracing off), default selection, all
traced() {
	l=$(run_us env LD_PRELOAD="$1/libmsgtrace-preload.so" MSGTRACE_OUT="$dir/l.mtrace" MSGTRACE_MIN_US=off "$dir/startup")
	d=$(run_us env LD_PRELOAD="$1/libmsgtrace-preload.so" MSGTRACE_OUT="$dir/t.mtrace" MSGTRACE_QUIET=1 "$dir/startup")
	a=$(run_us env LD_PRELOAD="$1/libmsgtrace-preload.so" MSGTRACE_OUT="$dir/a.mtrace" MSGTRACE_QUIET=1 \
		MSGTRACE_METHODS=all "$dir/startup")
}
plain=() load=() def=() all=() bload=() bdef=() ball=()
for ((i = 0; i < runs + 1; i++)); do # the first round warms the caches and is not counted
	p=$(run_us env "$dir/startup") # through env as the others
	traced "$bin"
	if [ -n "$base" ]; then
		l0=$l d0=$d a0=$a
		traced "$base"
		((i > 0)) && bload+=("$l") bdef+=("$d") ball+=("$a")
		l=$l0 d=$d0 a=$a0
	fi
	((i == 0)) && continue
	plain+=("$p") load+=("$l") def+=("$d") all+=("$a")
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }
diffs() { # pairwise: $1-th array minus plain
	local -n x=$1
	for ((i = 0; i < ${#plain[@]}; i++)); do echo $((x[i] - plain[i])); done
}
ms() { awk -v u="$1" 'BEGIN {printf "%.1f ms", u / 1000}'; }
mp=$(median "${plain[@]}") ml=$(median "${load[@]}") md=$(median "${def[@]}") ma=$(median "${all[@]}")
dl=$(median $(diffs load)) dd=$(median $(diffs def)) da=$(median $(diffs all))
echo "bench-fixedcost: startup.m, $runs runs each, median wall time"
echo "  untraced                          $(ms "$mp")"
echo "  loaded, tracing off (bad config)  $(ms "$ml")  (+$(ms "$dl") pair by pair)"
echo "  traced, default selection         $(ms "$md")  (+$(ms "$dd") pair by pair)"
echo "  traced, MSGTRACE_METHODS=all      $(ms "$ma")  (+$(ms "$da") pair by pair)"
if [ -n "$base" ]; then
	echo "  $base, same rounds:"
	echo "  loaded, tracing off (bad config)  $(ms "$(median "${bload[@]}")")  (+$(ms "$(median $(diffs bload))") pair by pair)"
	echo "  traced, default selection         $(ms "$(median "${bdef[@]}")")  (+$(ms "$(median $(diffs bdef))") pair by pair)"
	echo "  traced, MSGTRACE_METHODS=all      $(ms "$(median "${ball[@]}")")  (+$(ms "$(median $(diffs ball))") pair by pair)"
fi
