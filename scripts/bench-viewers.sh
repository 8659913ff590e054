#!/usr/bin/env bash
# Size of each output format and the time speedscope (1.25.0, headless Chromium) takes to open
# it, for a synthetic trace of CALLS calls (default 1,000,000) full of touching calls.
#   bash scripts/bench-viewers.sh [CALLS] [DIR]
# Not a test: numbers depend on the machine. Needs scripts/setup.sh (chromium, web/node_modules).
set -euo pipefail
# the figures also go to docs/bench/viewers.md, dated, with the tree and the machine
source "$(dirname "$0")/bench-record.sh"
bench_record viewers "" "$0" "$@"
source "$(dirname "$0")/env.sh"
calls=${1:-1000000}
dir=${2:-$(mktemp -d)}
mkdir -p "$dir"
cd "$MSGTRACE_ROOT"
go build -o "$dir/machobind" ./cmd/machobind
MSGTRACE_BENCH_OUT="$dir/trace.raw" MSGTRACE_BENCH_CALLS=$calls go test -count=1 -run '^TestWriteTouchingTrace$' ./tracer >/dev/null
printf '%-22s %12s %10s\n' file bytes convert_s
cases=()
for f in trace.json trace.pftrace trace.speedscope.json trace.folded trace.pb.gz trace.svg; do
	s=$(date +%s.%N)
	"$dir/machobind" trace "$dir/trace.raw" -o "$dir/$f" --name touching
	e=$(date +%s.%N)
	printf '%-22s %12d %10.2f\n' "$f" "$(stat -c %s "$dir/$f")" "$(echo "$e - $s" | bc)"
done
echo "opening in speedscope (the SVG: in Chromium) ..."
cat >"$dir/cases.json" <<JSON
[{"file":"trace.speedscope.json","viewer":"speedscope","timeoutMs":600000},
 {"file":"trace.pb.gz","viewer":"speedscope","timeoutMs":600000},
 {"file":"trace.folded","viewer":"speedscope","timeoutMs":600000},
 {"file":"trace.json","viewer":"speedscope","timeoutMs":600000},
 {"file":"trace.svg","viewer":"svg","names":["-[Worker fib:]"]}]
JSON
node web/viewers.mjs "$dir" | python3 -c '
import json, sys
for r in json.load(sys.stdin):
    print("%-22s %8s ms to the first view  %s" % (r["file"], r.get("loadMs"), r.get("error") or ""))'
echo "outputs in $dir"
