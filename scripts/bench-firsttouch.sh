#!/usr/bin/env bash
# Crashes of a program whose threads first touch Foundation before its main thread does
# (testdata/gnustep/firsttouch.m, gnustep-base on gcc's runtime): gnustep-base itself crashes
# now and then so, untraced (a thread reaches NSMutableArray while another is still inside
# +[NSArray initialize]); tracing must not make it crash more often. RUNS runs of each:
# untraced, preloaded with the library at the default selection, and with MSGTRACE_METHODS=all,
# alternated (untraced, default, all, untraced, ...) so that a change of the machine's load hits
# all alike; prints how many runs of each died of a signal (and which), and how many ended
# otherwise than as they should. A count, not a timing: the rates differ with the machine and
# its load, so compare configurations of the same run, never with another run's figures. With
# BASE, a second build (say, the last commit's) runs in the same rounds, for a before and after.
#   bench-firsttouch.sh [RUNS] [BIN] [BASE]   (RUNS: 300; BIN: bin, with libmsgtrace-preload.so)
# FIRSTTOUCH_THREADS: the threads the program starts (4).
set -euo pipefail
# the figures also go to docs/bench/firsttouch.md, dated, with the tree and the machine
source "$(dirname "$0")/bench-record.sh"
bench_record firsttouch "FIRSTTOUCH_THREADS" "$0" "$@"
source "$(dirname "$0")/env.sh"
runs=${1:-300}
bin=${2:-$MSGTRACE_ROOT/bin}
base=${3:-}
threads=${FIRSTTOUCH_THREADS:-4}
for b in "$bin" $base; do
	for f in libmsgtrace.so libmsgtrace-preload.so; do
		[ -f "$b/$f" ] || { echo "bench-firsttouch: $b/$f missing (make build)" >&2; exit 1; }
	done
done
command -v gnustep-config >/dev/null || { echo "bench-firsttouch: gnustep-config missing (make setup)" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# in $dir: gnustep-config's flags hold -I., and the tree's objc/ would shadow <objc/runtime.h>
# shellcheck disable=SC2046
if ! (cd "$dir" && gcc -std=gnu11 $(gnustep-config --objc-flags) -w -o firsttouch "$MSGTRACE_ROOT/testdata/gnustep/firsttouch.m" \
	$(gnustep-config --base-libs) -lpthread 2>cc.txt); then
	cat "$dir/cc.txt" >&2
	exit 1
fi
mkdir -p "$dir/home"
export HOME=$dir/home FIRSTTOUCH_THREADS=$threads
want="firsttouch: $threads threads, $threads touches"
# no core files: hundreds of crashes are expected
ulimit -c 0

# per configuration: runs, crashes, crashes by signal name, runs that ended wrong otherwise
declare -A ran crashed signals wrong
configs=()
# one run of configuration name: the program under env's variables
run() {
	local name=$1 status out
	shift
	[ -n "${ran[$name]+x}" ] || { configs+=("$name"); ran[$name]=0 crashed[$name]=0 signals[$name]="" wrong[$name]=0; }
	status=0
	out=$(env "$@" "$dir/firsttouch" 2>/dev/null) || status=$?
	ran[$name]=$((ran[$name] + 1))
	if ((status > 128)); then
		crashed[$name]=$((crashed[$name] + 1))
		signals[$name]+=" $(kill -l $((status - 128)) 2>/dev/null || echo $((status - 128)))"
	elif ((status != 0)) || [ "$out" != "$want" ]; then
		wrong[$name]=$((wrong[$name] + 1))
	fi
}
traced() {
	local b=$1 tag=$2
	run "${tag}traced, default" LD_PRELOAD="$b/libmsgtrace-preload.so" MSGTRACE_OUT="$dir/t.mtrace" MSGTRACE_QUIET=1
	run "${tag}traced, all" LD_PRELOAD="$b/libmsgtrace-preload.so" MSGTRACE_OUT="$dir/a.mtrace" MSGTRACE_QUIET=1 MSGTRACE_METHODS=all
}
for ((i = 0; i < runs; i++)); do
	run untraced
	traced "$bin" ""
	[ -n "$base" ] && traced "$base" "base "
done 2>/dev/null # bash reports each child's signal; the counts say it
echo "bench-firsttouch: firsttouch.m, $threads threads, $runs runs of each, alternated"
for c in "${configs[@]}"; do
	by=$(tr ' ' '\n' <<<"${signals[$c]}" | sed '/^$/d' | sort | uniq -c | awk '{printf " %s %s", $2, $1}')
	printf '  %-22s %4d of %d crashed (%4.1f %%)%s%s\n' "$c" "${crashed[$c]}" "${ran[$c]}" \
		"$(awk -v a="${crashed[$c]}" -v b="${ran[$c]}" 'BEGIN {print 100 * a / b}')" \
		"${by:+:$by}" "$( ((wrong[$c] > 0)) && echo ", ${wrong[$c]} ended otherwise wrong")"
done
