#!/usr/bin/env bash
# ns per call of the interposer's paths against a direct call, the test dispatcher, a
# per-call-malloc trampoline and one rdtsc, measured in one run (x86_64, natively); then the
# method trampolines; then sends through a program's own slot with the real library linked in:
# untraced, recording, just paused and paused long enough for the slots to be parked.
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
# the paused path through the real library (issue 28): sends through the program's own slot
# untraced, recording, just paused (the interposer's flag test and jump) and paused long enough
# for the slots to be parked (objc_msgSend itself again), on the project's test runtime
go build -buildmode=c-archive -o "$out/libmsgtrace.a" ./cmd/libmsgtrace
gcc -O2 -fPIC -shared -Wl,-soname,libtobjc.so -o "$out/libtobjc.so" testdata/objcapp/tobjc.c testdata/objcapp/tobjc_amd64.S -lpthread
gcc -O2 -Wno-cast-function-type -Icmd/libmsgtrace -Itestdata/objcapp -o "$out/bench_park" testdata/capi/bench_park.c "$out/libmsgtrace.a" \
	-L"$out" -ltobjc -lpthread -ldl -Wl,-rpath,"$out"
(cd "$out" && MSGTRACE_OUT="$out/park.mtrace" MSGTRACE_QUIET=1 ./bench_park)
