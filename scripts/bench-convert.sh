#!/usr/bin/env bash
# Converting a big recording of a real program, and what it costs: testdata/gnustep/oneloop.m
# (gnustep-base, gcc's GNU runtime; its whole run is one long outermost call, as a GUI
# application's run loop is, plus a worker NSThread whose work is one call too) recorded once
# under MSGTRACE_METHODS=all, about 12 M calls by default; then `machobind trace` to each format
# under /usr/bin/time: wall seconds, calls/s, peak RSS, output bytes and bytes a call, the median
# of REPS runs (default 1), each next to decoding the same stream alone (every frame checked,
# every event decoded: tracer's BenchmarkConvertOne with MSGTRACE_BENCH_FORMAT=decode, the floor
# of any conversion) as a ratio. Then the same program converting at exit (MSGTRACE_OUT=x.pftrace,
# x.json, x.pb.gz) against writing the stream alone (x.mtrace): the traced process's wall and
# peak RSS, medians of REPS runs too.
#
#	scripts/bench-convert.sh [MAIN_TURNS [WORKER_TURNS]]	(about 3,300 calls a turn)
#
# Needs bin/machobind, bin/libmsgtrace.so and bin/libmsgtrace-preload.so (make build), gcc and
# gnustep-base (make setup), and /usr/bin/time (Debian's time). Work files go to
# bin/bench-convert (BENCH_DIR), removed at the end unless KEEP=1.
set -euo pipefail
# the figures also go to docs/bench/convert.md, dated, with the tree and the machine
source "$(dirname "$0")/bench-record.sh"
bench_record convert "REPS BENCH_DIR KEEP" "$0" "$@"
source "$(dirname "$0")/env.sh"
cd "$MSGTRACE_ROOT"
main=${1:-2400}
worker=${2:-1200}
reps=${REPS:-1}
dir=${BENCH_DIR:-bin/bench-convert}
for f in bin/machobind bin/libmsgtrace.so bin/libmsgtrace-preload.so; do
	[ -f "$f" ] || { echo "bench-convert: $f missing (make build)" >&2; exit 1; }
done
for t in gcc gnustep-config /usr/bin/time; do
	command -v "$t" >/dev/null || { echo "bench-convert: $t missing (make setup: gobjc, libgnustep-base-dev, time)" >&2; exit 1; }
done
mkdir -p "$dir"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$dir"' EXIT
dir=$(cd "$dir" && pwd) # (BENCH_DIR may be relative or absolute)
export HOME="$dir/home"  # GNUstep's defaults database: not the user's
mkdir -p "$HOME"

# compiled in $dir: gnustep-config's flags put "." on the include path, and the repository's
# objc/runtime.h is not the runtime's
# shellcheck disable=SC2046
(cd "$dir" && gcc -std=gnu11 $(gnustep-config --objc-flags) -o oneloop "$MSGTRACE_ROOT/testdata/gnustep/oneloop.m" $(gnustep-config --base-libs)) 2>"$dir/gcc.log" ||
	{ cat "$dir/gcc.log" >&2; exit 1; }
# shellcheck disable=SC2086
rm -f $dir/*.d

# timed OUT CMD...: runs CMD under /usr/bin/time; prints "wall_s peak_KiB cpu_s" (cpu: user +
# sys, what a busy shared machine disturbs least)
timed() {
	local out=$1
	shift
	/usr/bin/time -f '%e %M %U %S' -o "$dir/time.txt" "$@" >"$out" 2>>"$dir/stderr.log" ||
		{ echo "bench-convert: failed: $*" >&2; tail -20 "$dir/stderr.log" >&2; exit 1; }
	awk 'END { print $1, $2, $3 + $4 }' "$dir/time.txt"
}

# traced OUT ENV...: timed, the program preloaded (as machobind run does), every method
# instrumented
traced() {
	local out=$1
	shift
	timed "$out" env "$@" LD_PRELOAD="$PWD/bin/libmsgtrace-preload.so" MSGTRACE_METHODS=all "$dir/oneloop" "$main" "$worker"
}

# median of numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

plain=$("$dir/oneloop" "$main" "$worker")
read -r pwall prss _ <<<"$(timed /dev/null "$dir/oneloop" "$main" "$worker")"

# record once
stream=$dir/run.mtrace
rm -f "$stream"
: >"$dir/stderr.log"
read -r rwall rrss _ <<<"$(traced "$dir/stdout.txt" MSGTRACE_OUT="$stream")"
[ "$(cat "$dir/stdout.txt")" = "$plain" ] || { echo "bench-convert: the traced program printed something else" >&2; exit 1; }
# the library's summary at exit: "msgtrace: FILE: N calls on T threads (...)"
calls=$(sed -n 's/^msgtrace: .*: \([0-9][0-9]*\) calls on .*/\1/p' "$dir/stderr.log" | tail -1)
[ -n "$calls" ] && [ "$calls" -gt 0 ] || { echo "bench-convert: no call count in the library's summary" >&2; cat "$dir/stderr.log" >&2; exit 1; }
ssize=$(stat -c %s "$stream")

echo "bench-convert: oneloop $main+$worker turns (testdata/gnustep/oneloop.m, gnustep-base), MSGTRACE_METHODS=all;" \
	"$(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
awk -v c="$calls" -v s="$ssize" -v w="$rwall" -v r="$rrss" -v pw="$pwall" -v pr="$prss" 'BEGIN {
	printf "recorded: %d calls, stream %.1f MB (%.2f bytes/call); traced run %.2f s, peak RSS %d MiB (untraced %.2f s, %d MiB)\n",
		c, s / 1e6, s / c, w, r / 1024, pw, pr / 1024 }'
# decoding alone, in process (tracer's benchmark, built here): the rate the rows are compared to
(cd "$MSGTRACE_ROOT" && "${GO:-go}" test -c -o "$dir/tracer.test" ./tracer) >"$dir/gotest.log" 2>&1 ||
	{ cat "$dir/gotest.log" >&2; exit 1; }
dns=$(MSGTRACE_BENCH_STREAM="$stream" MSGTRACE_BENCH_FORMAT=decode "$dir/tracer.test" -test.run '^$' \
	-test.bench '^BenchmarkConvertOne$' -test.benchtime "$((reps > 3 ? reps : 3))x" | awk '$1 ~ /^BenchmarkConvertOne/ { print $3 }')
[ -n "$dns" ] || { echo "bench-convert: the decode benchmark printed no time" >&2; exit 1; }
decode=$(awk -v c="$calls" -v ns="$dns" 'BEGIN { printf "%.2f", c / (ns / 1e9) / 1e6 }')

echo
printf '%-22s %8s %8s %12s %9s %14s %14s %10s\n' "machobind trace" "wall s" "cpu s" "M calls/s" "x decode" "peak RSS MiB" "output bytes" "bytes/call"
awk -v ns="$dns" -v d="$decode" 'BEGIN { printf "%-22s %8.2f %8s %12.2f %9.2f %14s %14s %10s\n", "(decode only)", ns / 1e9, "", d, 1, "", "", "" }'
# the timelines keep a budget of calls by default (the longest; the rest folded into their
# callers): "all" rows convert every call (--max-calls all), as before budgets existed
# (Perfetto's budget, 20 M, is above this run's calls: its "all" row checks that it is the same)
convs=(pftrace json speedscope.json pb.gz folded svg)
if bin/machobind trace -h 2>&1 | grep -q -- -max-calls; then
	convs+=("pftrace all" "json all" "speedscope.json all")
fi
for conv in "${convs[@]}"; do
	read -r ext every <<<"$conv"
	out=$dir/run.$ext
	flags=()
	[ -z "$every" ] || flags=(--max-calls all)
	walls=() rsses=() cpus=()
	for ((i = 0; i < reps; i++)); do
		rm -f "$out"
		read -r w r u <<<"$(timed /dev/null bin/machobind trace "$stream" -o "$out" "${flags[@]}")"
		walls+=("$w")
		rsses+=("$r")
		cpus+=("$u")
	done
	w=$(printf '%s\n' "${walls[@]}" | median)
	r=$(printf '%s\n' "${rsses[@]}" | median)
	u=$(printf '%s\n' "${cpus[@]}" | median)
	size=$(stat -c %s "$out")
	awk -v e=".$ext${every:+ $every}" -v w="$w" -v u="$u" -v r="$r" -v s="$size" -v c="$calls" -v d="$decode" 'BEGIN {
		m = (w > 0 ? c / w / 1e6 : 0)
		printf "%-22s %8.2f %8.2f %12.2f %9.2f %14.0f %14d %10.2f\n", e, w, u, m, m / d, r / 1024, s, s / c }'
	if [ "$ext" = json ] && [ -z "$every" ]; then
		# the converter's own count (otherData.calls) is the recorder's
		got=$(tail -c 400 "$out" | sed -n 's/.*"otherData":{"calls":\([0-9]*\).*/\1/p')
		[ "$got" = "$calls" ] || { echo "bench-convert: the JSON's otherData.calls is $got, the recorder's $calls" >&2; exit 1; }
	fi
	rm -f "$out"
done
rm -f "$stream"

echo
echo "converting at exit (the library, in the traced process) against writing the stream alone:"
printf '%-22s %8s %8s %14s %14s\n' "MSGTRACE_OUT" "wall s" "cpu s" "peak RSS MiB" "output bytes"
for ext in mtrace pftrace json pb.gz; do
	out=$dir/exit.$ext
	walls=() rsses=() cpus=()
	for ((i = 0; i < reps; i++)); do
		rm -f "$out"
		read -r w r u <<<"$(traced /dev/null MSGTRACE_OUT="$out" MSGTRACE_QUIET=1)"
		walls+=("$w")
		rsses+=("$r")
		cpus+=("$u")
	done
	w=$(printf '%s\n' "${walls[@]}" | median)
	r=$(printf '%s\n' "${rsses[@]}" | median)
	u=$(printf '%s\n' "${cpus[@]}" | median)
	size=$(stat -c %s "$out")
	awk -v e="x.$ext" -v w="$w" -v u="$u" -v r="$r" -v s="$size" 'BEGIN { printf "%-22s %8.2f %8.2f %14.0f %14d\n", e, w, u, r / 1024, s }'
	rm -f "$out"
done
