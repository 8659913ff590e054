#!/usr/bin/env bash
# ns per call of the interposer's paths against a direct call, the test dispatcher, a
# per-call-malloc trampoline and one rdtsc, measured in one run (x86_64, natively).
set -euo pipefail
# the figures also go to docs/bench/interposer.md, dated, with the tree and the machine
source "$(dirname "$0")/bench-record.sh"
bench_record interposer "" "$0" "$@"
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
gcc -O2 -Wno-cast-function-type -I. -Itestdata/interposer -o "$out/bench" testdata/interposer/bench.c rt*.c drain*.c objc/runtime.c \
	msgsend_amd64.S testdata/interposer/runtime_amd64.S testdata/interposer/rn_amd64.S -lpthread -ldl
"$out/bench"
# method trampolines (issue 13): ns per call through a trampoline vs a direct IMP call and the interposer
gcc -O2 -Wno-cast-function-type -I. -Itestdata/interposer -o "$out/bench_methods" testdata/interposer/bench_methods.c rt*.c drain*.c objc/runtime.c \
	msgsend_amd64.S trampoline_amd64.S testdata/interposer/runtime_amd64.S -lpthread -ldl
"$out/bench_methods"
