#!/usr/bin/env bash
# The cost of an async hop. First the hop itself, in one process (testdata/interposer/
# bench_hops.c): dispatch_async_f through the library's wrapper (recording, and paused) against
# the same call straight to a stand-in dispatch, best of 9 rounds by the thread's CPU clock.
# Then in a real program (testdata/gnustep/hopbench.m: N gnustep-base timers, each added to a
# run loop mode and fired by a pass of it) untraced, traced with MSGTRACE_FLOWS=0 and traced
# with flows on (the default selection), alternated RUNS times; the median ns per timer of
# each, and what a hop adds (flows on minus off) with the ratios against untraced (wall time: on
# a busy machine the timers' own microseconds vary by more than a hop costs).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
n=${2:-20000}
lib=$(pwd)/bin/libmsgtrace-preload.so
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
gcc -O2 -Wno-cast-function-type -I. -Itestdata/interposer -rdynamic -o "$out/bench_hops" testdata/interposer/bench_hops.c \
	rt*.c drain*.c objc/runtime.c hops.c hops_dispatch.c msgsend_amd64.S trampoline_amd64.S testdata/interposer/runtime_amd64.S -lpthread -ldl
"$out/bench_hops"
src=$(pwd)/testdata/gnustep/hopbench.m
# built in its directory: gnustep-config's -I. must not find the repository's objc/runtime.h
(cd "$out" && gcc -std=gnu11 $(gnustep-config --objc-flags) -o hopbench "$src" $(gnustep-config --base-libs) -ldl -lpthread)
one() { "$@" "$out/hopbench" "$n" 2>/dev/null | sed -n 's/ ns per timer//p'; }
for ((i = 0; i < runs; i++)); do
	one env >>"$out/untraced"
	one env LD_PRELOAD="$lib" MSGTRACE_OUT="$out/off.mtrace" MSGTRACE_FLOWS=0 >>"$out/off"
	one env LD_PRELOAD="$lib" MSGTRACE_OUT="$out/on.mtrace" >>"$out/on"
done
median() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
u=$(median "$out/untraced") f=$(median "$out/off") o=$(median "$out/on")
echo "ns per timer (median of $runs runs of $n): untraced $u, traced MSGTRACE_FLOWS=0 $f, traced flows on $o"
awk -v u="$u" -v f="$f" -v o="$o" 'BEGIN { printf "a hop adds %.0f ns (flows on minus off); on/untraced %.2fx, off/untraced %.2fx\n", o - f, o / u, f / u }'
