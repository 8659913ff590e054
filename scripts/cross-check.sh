#!/usr/bin/env bash
# Checks what scripts/cross.sh built: architectures, platform (LC_BUILD_VERSION macOS 1, iOS 2,
# iOS simulator 7), exported msgtrace_* functions (those msgtrace.h declares, or -symbols a,b),
# install name and dependencies of the dylibs, runtime/cgo built for iOS, objc_msgSend imports,
# and a link of each iOS archive for its target (internal/crosscheck). Reads every file back with
# `machobind dump --json`; archives member by member (dump does not read static archives).
# Dylibs and the msgtrace.framework binaries: initializer order, export trie, binds and imports
# read again with llvm-objdump; the frameworks' bundles, msgtrace.xcframework, and an app linked
# against each framework (the framework its first LC_LOAD_DYLIB).
# usage: scripts/cross-check.sh [OUTDIR [crosscheck flags...]]   OUTDIR default bin/cross
# env:   MSGTRACE_IOS_MIN, MSGTRACE_MACOS_MIN as given to cross.sh (every file must carry them)
set -euo pipefail
source "$(dirname "$0")/env.sh"
out=$(realpath -m "${1:-$MSGTRACE_ROOT/bin/cross}")
shift || true
cd "$MSGTRACE_ROOT"
go build -o bin/machobind ./cmd/machobind
go run ./internal/crosscheck -machobind "$MSGTRACE_ROOT/bin/machobind" -ar llvm-ar-19 -lipo "$LIPO" \
	-clang "$CLANG" -objdump "$OBJDUMP" -ios-min "${MSGTRACE_IOS_MIN:-14.0}" -macos-min "${MSGTRACE_MACOS_MIN:-12.0}" -sdk "$SDK" -libsystem "$(dirname "$ZIG")/lib/libc/darwin/libSystem.tbd" "$@" "$out"
