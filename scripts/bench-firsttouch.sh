#!/usr/bin/env bash
# Crashes of programs whose threads first touch Foundation before their main thread does
# (gnustep-base on gcc's runtime): gnustep-base itself crashes now and then so, untraced, in two
# races of its own; tracing must not make it crash more often.
#   firsttouch  testdata/gnustep/firsttouch.m: a thread reaches NSMutableArray while another is
#               still inside +[NSArray initialize] (rare: a few runs in a hundred)
#   poolnew     testdata/gnustep/poolnew.m: a thread calls +[NSAutoreleasePool new]'s second
#               static IMP before the first thread set it (often: one run in five or so)
# RUNS runs of each program in each configuration: untraced, preloaded with the library at the
# default selection, and with MSGTRACE_METHODS=all, alternated (untraced, default, all, untraced,
# ...) so that a change of the machine's load hits all alike; prints how many runs of each died
# of a signal (and which), how many ended otherwise than as they should, and for each traced
# configuration Fisher's exact test against the untraced runs of the same program (two-sided p:
# how likely counts at least this far apart are when tracing changes nothing). A count, not a
# timing: the rates differ with the machine and its load, so compare configurations of the same
# run, never with another run's figures. With BASE, a second build (say, the last commit's) runs
# in the same rounds, for a before and after.
#   bench-firsttouch.sh [RUNS] [BIN] [BASE]   (RUNS: 300; BIN: bin, with libmsgtrace-preload.so)
# FIRSTTOUCH_THREADS: the threads each program starts (4). FIRSTTOUCH_PROGS: which programs
# ("firsttouch poolnew"). FIRSTTOUCH_COUNTS: a file the counts are also written to, one line per
# program and configuration (program, configuration, runs, crashed, ended otherwise wrong, p,
# one-sided p of "above untraced").
# FIRSTTOUCH_CPUS: run the programs on these processors only (taskset -c: "1" puts every thread
# of the program, and of the library's, on one processor). There the count is set by the timing
# of the workers' start, which anything before main moves (a constructor that only spins moved
# poolnew's 10x, untraced: docs/limits.md), so a one-processor count above or below untraced
# says more about that timing than about tracing.
# FIRSTTOUCH_BLOCKS: the rounds are also counted in this many blocks of consecutive rounds (5;
# 1: not), each with its start time: the counts drift with the machine's load and the hour, in
# both directions, so a difference that holds in one block only is drift, not tracing.
# Exit status 3 when a traced configuration crashed more often than untraced beyond chance
# (one-sided Fisher p < 0.001: "above untraced"); the run is recorded then too.
set -euo pipefail
# the figures also go to docs/bench/firsttouch.md, dated, with the tree and the machine
source "$(dirname "$0")/bench-record.sh"
bench_record firsttouch "FIRSTTOUCH_THREADS FIRSTTOUCH_PROGS FIRSTTOUCH_CPUS FIRSTTOUCH_BLOCKS" "$0" "$@"
source "$(dirname "$0")/env.sh"
runs=${1:-300}
bin=${2:-$MSGTRACE_ROOT/bin}
base=${3:-}
threads=${FIRSTTOUCH_THREADS:-4}
blocks=${FIRSTTOUCH_BLOCKS:-5}
[[ "$blocks" =~ ^[1-9][0-9]*$ ]] || { echo "bench-firsttouch: FIRSTTOUCH_BLOCKS=$blocks: not a count of blocks" >&2; exit 1; }
((blocks <= runs)) || blocks=$runs
for b in "$bin" $base; do
	for f in libmsgtrace.so libmsgtrace-preload.so; do
		[ -f "$b/$f" ] || { echo "bench-firsttouch: $b/$f missing (make build)" >&2; exit 1; }
	done
done
command -v gnustep-config >/dev/null || { echo "bench-firsttouch: gnustep-config missing (make setup)" >&2; exit 1; }
pin=()
if [ -n "${FIRSTTOUCH_CPUS:-}" ]; then
	taskset -c "$FIRSTTOUCH_CPUS" true || { echo "bench-firsttouch: FIRSTTOUCH_CPUS=$FIRSTTOUCH_CPUS: not processors taskset takes" >&2; exit 1; }
	pin=(taskset -c "$FIRSTTOUCH_CPUS")
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
progs=${FIRSTTOUCH_PROGS:-firsttouch poolnew}
# in $dir: gnustep-config's flags hold -I., and the tree's objc/ would shadow <objc/runtime.h>
for p in $progs; do
	[ -f "$MSGTRACE_ROOT/testdata/gnustep/$p.m" ] || { echo "bench-firsttouch: no testdata/gnustep/$p.m" >&2; exit 1; }
	# shellcheck disable=SC2046
	if ! (cd "$dir" && gcc -std=gnu11 $(gnustep-config --objc-flags) -w -o "$p" "$MSGTRACE_ROOT/testdata/gnustep/$p.m" \
		$(gnustep-config --base-libs) -lpthread 2>cc.txt); then
		cat "$dir/cc.txt" >&2
		exit 1
	fi
done
mkdir -p "$dir/home"
export HOME=$dir/home FIRSTTOUCH_THREADS=$threads
declare -A want=([firsttouch]="firsttouch: $threads threads, $threads touches" [poolnew]="poolnew: $threads threads")
# no core files: hundreds of crashes are expected
ulimit -c 0

# per program and configuration ("prog|config"): runs, crashes, crashes by signal name, runs
# that ended wrong otherwise; crashes per block ("prog|config|block"); each block's start time
declare -A ran crashed signals wrong inblock
configs=() started=() wrongs=()
block=0
# one run of program prog in configuration name: the program under env's variables
run() {
	local prog=$1 name=$2 key status out
	shift 2
	key="$prog|$name"
	[ -n "${ran[$key]+x}" ] || { configs+=("$key"); ran[$key]=0 crashed[$key]=0 signals[$key]="" wrong[$key]=0; }
	status=0
	out=$("${pin[@]}" env "$@" "$dir/$prog" 2>"$dir/stderr") || status=$?
	ran[$key]=$((ran[$key] + 1))
	if ((status > 128)); then
		crashed[$key]=$((crashed[$key] + 1))
		inblock[$key|$block]=$((${inblock[$key|$block]:-0} + 1))
		signals[$key]+=" $(kill -l $((status - 128)) 2>/dev/null || echo $((status - 128)))"
	elif ((status != 0)) || [ "$out" != "${want[$prog]}" ]; then
		wrong[$key]=$((wrong[$key] + 1))
		if ((${#wrongs[@]} < 5)); then # what the first few said
			wrongs+=("$prog, $name, round $((i + 1)): exit status $status, stdout $(head -c 200 <<<"$out" | tr '\n' '|'), stderr $(tail -n 5 "$dir/stderr" | head -c 400 | tr '\n' '|')")
		fi
	fi
}
traced() {
	local prog=$1 b=$2 tag=$3
	run "$prog" "${tag}traced, default" LD_PRELOAD="$b/libmsgtrace-preload.so" MSGTRACE_OUT="$dir/t.mtrace" MSGTRACE_QUIET=1
	run "$prog" "${tag}traced, all" LD_PRELOAD="$b/libmsgtrace-preload.so" MSGTRACE_OUT="$dir/a.mtrace" MSGTRACE_QUIET=1 MSGTRACE_METHODS=all
}
for ((i = 0; i < runs; i++)); do
	block=$((i * blocks / runs))
	[ -n "${started[$block]:-}" ] || started[$block]=$(date -u +%H:%M)
	for p in $progs; do
		run "$p" untraced
		traced "$p" "$bin" ""
		[ -n "$base" ] && traced "$p" "$base" "base "
	done
done 2>/dev/null # bash reports each child's signal; the counts say it

# fisher A N B M [greater]: two-sided p of Fisher's exact test, A of N against B of M; with
# "greater", one-sided: how likely B or more of M are when both rates are the same
fisher() {
	awk -v a="$1" -v n="$2" -v b="$3" -v m="$4" -v greater="${5:-}" 'BEGIN {
		t = n + m; c = a + b
		lf[0] = 0
		for (k = 1; k <= t; k++) lf[k] = lf[k - 1] + log(k)
		base = lf[c] + lf[t - c] + lf[n] + lf[m] - lf[t]
		obs = base - lf[a] - lf[n - a] - lf[b] - lf[m - b]
		lo = c - m > 0 ? c - m : 0; hi = c < n ? c : n; p = 0
		for (x = lo; x <= hi; x++) {
			q = base - lf[x] - lf[n - x] - lf[c - x] - lf[m - c + x]
			if (greater != "") { if (c - x >= b && q > -700) p += exp(q) } # the traced count: c - x
			else if (q <= obs + 1e-7 && q > -700) p += exp(q) # past -700: nothing a double holds
		}
		printf "%.3g", (p > 1 ? 1 : p)
	}'
}
[ -n "${FIRSTTOUCH_COUNTS:-}" ] && : >"$FIRSTTOUCH_COUNTS"
echo "bench-firsttouch: $threads threads, $runs runs of each, alternated${FIRSTTOUCH_CPUS:+, on processors $FIRSTTOUCH_CPUS}"
above=()
for c in "${configs[@]}"; do
	prog=${c%%|*} name=${c#*|}
	by=$(tr ' ' '\n' <<<"${signals[$c]}" | sed '/^$/d' | sort | uniq -c | awk '{printf " %s %s", $2, $1}')
	p=- pg=-
	if [ "$name" != untraced ]; then
		p=$(fisher "${crashed[$prog|untraced]}" "${ran[$prog|untraced]}" "${crashed[$c]}" "${ran[$c]}")
		pg=$(fisher "${crashed[$prog|untraced]}" "${ran[$prog|untraced]}" "${crashed[$c]}" "${ran[$c]}" greater)
		awk -v p="$pg" 'BEGIN {exit !(p < 0.001)}' && above+=("$prog $name")
	fi
	printf '  %-11s %-22s %4d of %d crashed (%4.1f %%)%s%s%s\n' "$prog" "$name" "${crashed[$c]}" "${ran[$c]}" \
		"$(awk -v a="${crashed[$c]}" -v b="${ran[$c]}" 'BEGIN {print 100 * a / b}')" \
		"${by:+:$by}" "$( ((wrong[$c] > 0)) && echo ", ${wrong[$c]} ended otherwise wrong")" \
		"$([ "$p" != - ] && echo "; against untraced p = $p, above it p = $pg")"
	[ -n "${FIRSTTOUCH_COUNTS:-}" ] && printf '%s\t%s\t%d\t%d\t%d\t%s\t%s\n' "$prog" "$name" "${ran[$c]}" "${crashed[$c]}" "${wrong[$c]}" "$p" "$pg" >>"$FIRSTTOUCH_COUNTS"
done
if ((${#wrongs[@]} > 0)); then
	echo "runs that ended otherwise wrong (the first ${#wrongs[@]}):"
	printf '  %s\n' "${wrongs[@]}"
fi
if ((blocks > 1)); then
	echo "crashes by block of consecutive rounds (start time, UTC):"
	for ((k = 0; k < blocks; k++)); do
		for p in $progs; do
			line=$(printf '  %d %s rounds %d-%d, %s:' "$((k + 1))" "${started[$k]}" "$((k * runs / blocks + 1))" "$(((k + 1) * runs / blocks))" "$p")
			for c in "${configs[@]}"; do
				[ "${c%%|*}" = "$p" ] || continue
				name=${c#*|}
				line+=" ${name/traced, /} ${inblock[$c|$k]:-0},"
			done
			echo "${line%,}"
		done
	done
fi
if ((${#above[@]} > 0)); then
	printf 'bench-firsttouch: crashed more often than untraced (one-sided p < 0.001):'
	printf ' %s;' "${above[@]}"
	echo
	exit 3
fi
echo "bench-firsttouch: no traced configuration crashed more often than untraced (one-sided p < 0.001)"
exit 0
