#!/usr/bin/env bash
# What recording contended waits costs (waits.c), in one run (x86_64 or arm64, natively): an
# uncontended pthread mutex untraced, through the replacements with waits on and off, and the
# cost of one recorded wait (testdata/waits/bench.c says how each is measured).
set -euo pipefail
# the figures also go to docs/bench/waits.md, dated, with the tree and the machine
source "$(dirname "$0")/bench-record.sh"
bench_record waits "" "$0" "$@"
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
arch=$(uname -m)
case $arch in x86_64) asm="msgsend_amd64.S trampoline_amd64.S" ;; aarch64) asm="msgsend_arm64.S trampoline_arm64.S" ;; esac
gcc -O2 -Wall -I. -o "$out/bench" testdata/waits/bench.c rt*.c drain*.c waits.c objc/runtime.c $asm -lpthread -ldl
"$out/bench"
