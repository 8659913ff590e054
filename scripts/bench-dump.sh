#!/usr/bin/env bash
# Benchmark: `machobind dump --json` against `llvm-objdump-19 --macho --indirect-symbols` on the
# largest Mach-O file of a folder (default: testdata/corpus), in one run, same file, warm cache.
# Prints mean wall time over N runs, the ratio, and peak RSS of each (GNU time's %M).
set -euo pipefail
# the figures also go to docs/bench/dump.md, dated, with the tree and the machine
source "$(dirname "$0")/bench-record.sh"
bench_record dump "RUNS MACHOBIND OBJDUMP" "$0" "$@"
dir=${1:-testdata/corpus}
runs=${RUNS:-10}
bin=${MACHOBIND:-bin/machobind}
objdump=${OBJDUMP:-llvm-objdump-19}
file=$(find "$dir" -type f -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2-)
[ -n "$file" ] || { echo "no files in $dir" >&2; exit 1; }
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 1; }
size=$(stat -c %s "$file")
echo "file: $file ($((size / 1024 / 1024)) MiB), $runs runs each"

measure() { # name cmd...: mean ms and peak RSS KiB
	local name=$1; shift
	"$@" >/dev/null # warm the page cache
	local t0 t1 rss
	t0=$(date +%s%N)
	for _ in $(seq "$runs"); do "$@" >/dev/null; done
	t1=$(date +%s%N)
	rss=$( { /usr/bin/time -f '%M' "$@" >/dev/null; } 2>&1 | tail -1)
	echo "$name $(( (t1 - t0) / runs / 1000 )) $rss"
}
a=$(measure machobind "$bin" dump --json "$file")
b=$(measure objdump "$objdump" --macho --indirect-symbols "$file")
read -r _ ta ra <<<"$a"
read -r _ tb rb <<<"$b"
printf '%-42s %10s %12s\n' command "mean µs" "peak RSS KiB"
printf '%-42s %10d %12d\n' "machobind dump --json" "$ta" "$ra"
printf '%-42s %10d %12d\n' "llvm-objdump-19 --macho --indirect-symbols" "$tb" "$rb"
awk -v a="$ta" -v b="$tb" 'BEGIN { printf "ratio machobind/objdump: %.3f\n", a / b }'
