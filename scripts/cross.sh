#!/usr/bin/env bash
# Cross-builds the tracer library for Apple platforms from Linux:
#   macos-arm64/libmsgtrace.dylib, macos-x86_64/libmsgtrace.dylib   go -buildmode=c-shared
#   macos/libmsgtrace.dylib                                          universal (llvm-lipo)
#   ios-arm64/libmsgtrace.a                                          go -buildmode=c-archive, device
#   ios-simulator-arm64/libmsgtrace.a, ios-simulator-x86_64/...      c-archive, simulator
#   ios-simulator/libmsgtrace.a                                      universal simulator archive
#   libmsgtrace.xcframework                                          device + simulator archives
#   msgtrace.h (the package's public header, not cgo's generated one), MANIFEST (sha256 size path)
#
# usage: scripts/cross.sh [PKG [OUTDIR]]   PKG default ./cmd/libmsgtrace, OUTDIR default bin/cross
# env:   MSGTRACE_MACOS_MIN (12.0), MSGTRACE_IOS_MIN (14.0), MSGTRACE_HEADER (PKG's msgtrace.h),
#        MSGTRACE_CROSS_LDFLAGS (-w), MSGTRACE_CROSS_TARGETS (all: "macos-arm64 macos-x86_64 ...")
#
# The C compiler for cgo is clang-19 with -target ARCH-apple-{macosN,iosN,iosN-simulator}: the
# target is what makes Go's runtime/cgo an iOS build (TARGET_OS_IPHONE, and
# __APPLE_EMBEDDED_SIMULATOR__ on the simulator) and what stamps every object's LC_BUILD_VERSION;
# Go's linker copies the platform of the first C object into go.o, so the whole archive agrees.
# GOOS=ios GOARCH=amd64 is simulator-only in practice; ios/arm64 is device or simulator by the C
# target alone (Go has no separate GOOS for it). libc headers: the macOS SDK headers the pinned zig
# ships (Apple's headers are the same for iOS, selected by availability macros), after clang's own;
# CoreFoundation headers (iOS runtime/cgo needs CFBundle.h/CFString.h): ours, in sdk/.
# Dylibs are linked by ld64.lld-19 (zig's own Mach-O linker crashes on Go's go.o) against zig's
# complete macOS libSystem.tbd; -lpthread resolves to libSystem as in Apple's SDK. Archives are
# written by llvm-ar-19 (BSD/darwin format with a __.SYMDEF table that ld64 reads; GNU ar's is not).
# Deterministic: -trimpath, -buildid= (Go's build ID hashes the absolute paths in CC and CGO_*;
# without it the Mach-O UUID is lld's hash of the output), the checkout's path mapped to "." in
# the C debug info of the archives, zero archive dates.
set -euo pipefail
source "$(dirname "$0")/env.sh"
pkg=${1:-./cmd/libmsgtrace}
out=$(realpath -m "${2:-$MSGTRACE_ROOT/bin/cross}")
macos_min=${MSGTRACE_MACOS_MIN:-12.0}
ios_min=${MSGTRACE_IOS_MIN:-14.0}
ldflags=${MSGTRACE_CROSS_LDFLAGS:--w}
targets=${MSGTRACE_CROSS_TARGETS:-macos-arm64 macos-x86_64 ios-arm64 ios-simulator-arm64 ios-simulator-x86_64}
LLVM_AR=llvm-ar-19
zlib=$(dirname "$ZIG")/lib/libc
macinc=$zlib/include/any-macos-any

die() { echo "cross: $*" >&2; exit 1; }
for t in "$CLANG" "$LD64" "$LIPO" "$LLVM_AR" "$ZIG" go; do
	command -v "$t" >/dev/null || die "$t not found (run: make setup)"
done
[ -d "$macinc" ] && [ -f "$zlib/darwin/libSystem.tbd" ] || die "zig's macOS libc files are missing under $zlib (run: make setup)"

cd "$MSGTRACE_ROOT"
pkgdir=$(go list -e -f '{{.Dir}}' "$pkg")
[ -n "$pkgdir" ] && [ -d "$pkgdir" ] || die "package $pkg not found"
header=${MSGTRACE_HEADER:-$pkgdir/msgtrace.h}
[ -f "$header" ] || die "$header: no public header (set MSGTRACE_HEADER)"

stage=$out.partial
rm -rf "$stage"
mkdir -p "$stage"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$stage"' EXIT

# Libraries the linker sees, laid out as in Apple's SDK: libpthread is libSystem. A fixed path:
# CGO_LDFLAGS is part of Go's cache keys, a new directory each run would rebuild every cgo package.
libdir=$MSGTRACE_ROOT/.tools/cross-lib
mkdir -p "$libdir"
ln -sfn "$zlib/darwin/libSystem.tbd" "$libdir/libSystem.tbd"
ln -sfn "$zlib/darwin/libSystem.tbd" "$libdir/libpthread.tbd"
for l in libresolv libobjc; do ln -sfn "$SDK/usr/lib/$l.tbd" "$libdir/$l.tbd"; done

# build NAME GOOS GOARCH CLANG-TARGET BUILDMODE FILE
build() {
	local name=$1 goos=$2 goarch=$3 target=$4 mode=$5 file=$6 t0=$SECONDS
	mkdir -p "$stage/$name"
	env CGO_ENABLED=1 GOOS="$goos" GOARCH="$goarch" \
		CC="$CLANG -target $target -isysroot $SDK -idirafter $macinc -ffile-prefix-map=$MSGTRACE_ROOT=. -fuse-ld=lld -Wno-unused-command-line-argument" \
		CGO_CFLAGS="-O2 -g" CGO_LDFLAGS="-L$libdir -F$SDK/System/Library/Frameworks" \
		go build -trimpath -buildmode="$mode" \
		-ldflags="$ldflags -buildid= -extar=$(command -v $LLVM_AR) -extldflags=-Wl,-install_name,@rpath/libmsgtrace.dylib" \
		-o "$stage/$name/$file" "$pkg" || die "$name: go build failed"
	rm -f "$stage/$name/${file%.*}.h" # cgo's generated header: msgtrace.h is the public one
	echo "cross: $name ($goos/$goarch, $target, $mode) $(stat -c %s "$stage/$name/$file") bytes, $((SECONDS - t0)) s"
}

t0=$SECONDS
for name in $targets; do
	case $name in
	macos-arm64) build "$name" darwin arm64 "arm64-apple-macos$macos_min" c-shared libmsgtrace.dylib ;;
	macos-x86_64) build "$name" darwin amd64 "x86_64-apple-macos$macos_min" c-shared libmsgtrace.dylib ;;
	ios-arm64) build "$name" ios arm64 "arm64-apple-ios$ios_min" c-archive libmsgtrace.a ;;
	ios-simulator-arm64) build "$name" ios arm64 "arm64-apple-ios$ios_min-simulator" c-archive libmsgtrace.a ;;
	ios-simulator-x86_64) build "$name" ios amd64 "x86_64-apple-ios$ios_min-simulator" c-archive libmsgtrace.a ;;
	*) die "unknown target $name" ;;
	esac
done
cp "$header" "$stage/msgtrace.h"

# universal files, when both slices were built
if [ -f "$stage/macos-arm64/libmsgtrace.dylib" ] && [ -f "$stage/macos-x86_64/libmsgtrace.dylib" ]; then
	mkdir -p "$stage/macos"
	$LIPO -create -output "$stage/macos/libmsgtrace.dylib" "$stage/macos-arm64/libmsgtrace.dylib" "$stage/macos-x86_64/libmsgtrace.dylib"
fi
sim=()
for a in arm64 x86_64; do
	[ -f "$stage/ios-simulator-$a/libmsgtrace.a" ] && sim+=("$stage/ios-simulator-$a/libmsgtrace.a")
done
if [ ${#sim[@]} = 2 ]; then
	mkdir -p "$stage/ios-simulator"
	$LIPO -create -output "$stage/ios-simulator/libmsgtrace.a" "${sim[@]}"
fi

# XCFramework: a directory and an Info.plist, nothing Xcode-specific to run.
if [ -f "$stage/ios-arm64/libmsgtrace.a" ] && [ -f "$stage/ios-simulator/libmsgtrace.a" ]; then
	xc=$stage/libmsgtrace.xcframework
	for d in ios-arm64:ios-arm64 ios-arm64_x86_64-simulator:ios-simulator; do
		mkdir -p "$xc/${d%%:*}/Headers"
		cp "$stage/${d#*:}/libmsgtrace.a" "$xc/${d%%:*}/"
		cp "$header" "$xc/${d%%:*}/Headers/msgtrace.h"
	done
	lib() { # ID ARCHS... [-- VARIANT]
		local id=$1 variant=
		shift
		printf '\t\t<dict>\n\t\t\t<key>HeadersPath</key>\n\t\t\t<string>Headers</string>\n'
		printf '\t\t\t<key>LibraryIdentifier</key>\n\t\t\t<string>%s</string>\n' "$id"
		printf '\t\t\t<key>LibraryPath</key>\n\t\t\t<string>libmsgtrace.a</string>\n'
		printf '\t\t\t<key>SupportedArchitectures</key>\n\t\t\t<array>\n'
		while [ $# -gt 0 ]; do
			[ "$1" = -- ] && { variant=$2; break; }
			printf '\t\t\t\t<string>%s</string>\n' "$1"
			shift
		done
		printf '\t\t\t</array>\n\t\t\t<key>SupportedPlatform</key>\n\t\t\t<string>ios</string>\n'
		[ -n "$variant" ] && printf '\t\t\t<key>SupportedPlatformVariant</key>\n\t\t\t<string>%s</string>\n' "$variant"
		printf '\t\t</dict>\n'
	}
	{
		printf '<?xml version="1.0" encoding="UTF-8"?>\n'
		printf '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
		printf '<plist version="1.0">\n<dict>\n\t<key>AvailableLibraries</key>\n\t<array>\n'
		lib ios-arm64 arm64
		lib ios-arm64_x86_64-simulator arm64 x86_64 -- simulator
		printf '\t</array>\n\t<key>CFBundlePackageType</key>\n\t<string>XFWK</string>\n'
		printf '\t<key>XCFrameworkFormatVersion</key>\n\t<string>1.0</string>\n</dict>\n</plist>\n'
	} >"$xc/Info.plist"
fi

(cd "$stage" && find . -type f ! -name MANIFEST | sed 's|^\./||' | LC_ALL=C sort |
	while read -r f; do echo "$(sha256sum "$f" | cut -d' ' -f1) $(stat -c %s "$f") $f"; done >MANIFEST)
rm -rf "$out"
mv "$stage" "$out"
echo "cross: $(grep -c . "$out/MANIFEST") files in $out in $((SECONDS - t0)) s (listed in MANIFEST)"
