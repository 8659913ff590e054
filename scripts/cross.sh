#!/usr/bin/env bash
# Cross-builds the tracer library for Apple platforms from Linux:
#   macos-arm64/libmsgtrace.dylib, macos-x86_64/libmsgtrace.dylib   go -buildmode=c-shared
#   macos/libmsgtrace.dylib                                          universal (llvm-lipo)
#   ios-arm64/libmsgtrace.a                                          go -buildmode=c-archive, device
#   ios-simulator-arm64/libmsgtrace.a, ios-simulator-x86_64/...      c-archive, simulator
#   ios-simulator/libmsgtrace.a                                      universal simulator archive
#   libmsgtrace.xcframework                                          device + simulator archives
#   ios-arm64/msgtrace.framework, ios-simulator/msgtrace.framework  dynamic framework: the c-archive
#                                                                    linked whole into a dylib
#   macos/msgtrace.framework                                         dynamic framework (versioned), c-shared
#   msgtrace.xcframework                                             the three frameworks
#   msgtrace.h (the package's public header, not cgo's generated one), MANIFEST (sha256 size path)
#
# usage: scripts/cross.sh [PKG [OUTDIR]]   PKG default ./cmd/libmsgtrace, OUTDIR default bin/cross
# env:   MSGTRACE_MACOS_MIN (12.0), MSGTRACE_IOS_MIN (14.0), MSGTRACE_HEADER (PKG's msgtrace.h),
#        MSGTRACE_CROSS_LDFLAGS (-w), MSGTRACE_CROSS_TARGETS (all: "macos-arm64 macos-x86_64 ..."),
#        MSGTRACE_VERSION (0.1.0: the frameworks' CFBundleShortVersionString)
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
# the C debug info of the archives, zero archive dates, no debug map (-S) in the iOS frameworks.
#
# Frameworks: Go has no -buildmode=c-shared for GOOS=ios ("-buildmode=c-shared not supported on
# ios/arm64", cmd/go's internal/platform), so the iOS framework binary is the iOS c-archive linked
# whole (-force_load) into an MH_DYLIB by ld64.lld-19, against zig's libSystem.tbd retargeted to
# iOS and a CoreFoundation stub with the iOS install name (shallow bundle: .../CoreFoundation).
# Archive members keep their order, so Go's initializer (_rt0_*_lib, in go.o, the first member)
# runs before ctor.c's constructor, as in a c-shared library. The static archives and the
# frameworks are two XCFrameworks: an XCFramework holds one library per platform and variant
# (its LibraryIdentifier, e.g. ios-arm64), static or dynamic, not both.
set -euo pipefail
source "$(dirname "$0")/env.sh"
pkg=${1:-./cmd/libmsgtrace}
out=$(realpath -m "${2:-$MSGTRACE_ROOT/bin/cross}")
macos_min=${MSGTRACE_MACOS_MIN:-12.0}
ios_min=${MSGTRACE_IOS_MIN:-14.0}
version=${MSGTRACE_VERSION:-0.1.0}
# -X runtime.godebugDefault: no asynchronous preemption signal (SIGURG) sent into the app (Makefile LIBLDFLAGS)
ldflags="${MSGTRACE_CROSS_LDFLAGS:--w} -X=runtime.godebugDefault=asyncpreemptoff=1"
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
# The iOS frameworks' link: libSystem for the iOS targets, CoreFoundation at its iOS path.
ioslib=$libdir/ios
mkdir -p "$ioslib/CoreFoundation.framework"
sed -E 's/\barm64-macos\b/arm64-ios, arm64-ios-simulator/g; s/\bx86_64-macos\b/x86_64-ios-simulator/g' \
	"$zlib/darwin/libSystem.tbd" >"$ioslib/libSystem.tbd"
sed 's|CoreFoundation.framework/Versions/A/CoreFoundation|CoreFoundation.framework/CoreFoundation|' \
	"$SDK/System/Library/Frameworks/CoreFoundation.framework/CoreFoundation.tbd" >"$ioslib/CoreFoundation.framework/CoreFoundation.tbd"
for l in libresolv libobjc; do ln -sfn "$SDK/usr/lib/$l.tbd" "$ioslib/$l.tbd"; done

# build NAME GOOS GOARCH CLANG-TARGET BUILDMODE FILE [INSTALL-NAME]   (FILE: under $stage/NAME,
# or an absolute path)
build() {
	local name=$1 goos=$2 goarch=$3 target=$4 mode=$5 file=$6 id=${7:-@rpath/libmsgtrace.dylib} t0=$SECONDS
	[[ $file = /* ]] || file=$stage/$name/$file
	mkdir -p "$(dirname "$file")"
	env CGO_ENABLED=1 GOOS="$goos" GOARCH="$goarch" \
		CC="$CLANG -target $target -isysroot $SDK -idirafter $macinc -ffile-prefix-map=$MSGTRACE_ROOT=. -fuse-ld=lld -Wno-unused-command-line-argument" \
		CGO_CFLAGS="-O2 -g" CGO_LDFLAGS="-L$libdir -F$SDK/System/Library/Frameworks" \
		go build -trimpath -buildmode="$mode" \
		-ldflags="$ldflags -buildid= -extar=$(command -v $LLVM_AR) -extldflags=-Wl,-install_name,$id" \
		-o "$file" "$pkg" || die "$name: go build failed"
	local base=${file##*/} # cgo's generated header (FILE without its extension, + .h): msgtrace.h is the public one
	rm -f "${file%/*}/${base%.*}.h"
	echo "cross: $name ($goos/$goarch, $target, $mode) $(stat -c %s "$file") bytes, $((SECONDS - t0)) s"
}

# fwlink CLANG-TARGET ARCHIVE OUT: an iOS framework binary, the c-archive linked whole
fwlink() {
	local t0=$SECONDS
	$CLANG -target "$1" -fuse-ld=lld -dynamiclib -nostdlib -isysroot "$SDK" -L "$ioslib" -F "$ioslib" \
		-Wl,-install_name,@rpath/msgtrace.framework/msgtrace -Wl,-current_version,1 -Wl,-compatibility_version,1 \
		-Wl,-S -Wl,-dead_strip_dylibs -Wl,-force_load,"$2" -lSystem -lresolv -lobjc -framework CoreFoundation \
		-o "$3" || die "$1: linking the framework binary failed"
	echo "cross: msgtrace.framework ($1, c-archive linked by ld64.lld) $(stat -c %s "$3") bytes, $((SECONDS - t0)) s"
}

# fwplist PLATFORMS-NAME MIN-KEY MIN: a framework's Info.plist (iPhoneOS/iPhoneSimulator with
# MinimumOSVersion, which App Store validation wants in every embedded framework; MacOSX with
# LSMinimumSystemVersion)
fwplist() {
	printf '<?xml version="1.0" encoding="UTF-8"?>\n'
	printf '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
	printf '<plist version="1.0">\n<dict>\n'
	printf '\t<key>%s</key>\n\t<string>%s</string>\n' CFBundleDevelopmentRegion en CFBundleExecutable msgtrace \
		CFBundleIdentifier com.github.msgtrace.msgtrace CFBundleInfoDictionaryVersion 6.0 CFBundleName msgtrace \
		CFBundlePackageType FMWK CFBundleShortVersionString "$version" CFBundleVersion 1
	printf '\t<key>CFBundleSupportedPlatforms</key>\n\t<array>\n\t\t<string>%s</string>\n\t</array>\n' "$1"
	printf '\t<key>%s</key>\n\t<string>%s</string>\n' "$2" "$3"
	printf '</dict>\n</plist>\n'
}

# framework DIR BINARY PLATFORMS-NAME MIN-KEY MIN [versioned]: a framework bundle: shallow (iOS:
# binary, Info.plist, Headers, Modules at the top) or versioned (macOS: Versions/A, symlinks)
framework() {
	local fw=$1 bin=$2 top=$1
	if [ "${6:-}" = versioned ]; then
		top=$fw/Versions/A
		mkdir -p "$top/Resources"
		fwplist "$3" "$4" "$5" >"$top/Resources/Info.plist"
	else
		mkdir -p "$top"
		fwplist "$3" "$4" "$5" >"$top/Info.plist"
	fi
	mkdir -p "$top/Headers" "$top/Modules"
	cp "$bin" "$top/msgtrace"
	cp "$header" "$top/Headers/msgtrace.h"
	printf 'framework module msgtrace {\n\tumbrella header "msgtrace.h"\n\texport *\n}\n' >"$top/Modules/module.modulemap"
	if [ "${6:-}" = versioned ]; then
		ln -s A "$fw/Versions/Current"
		for l in msgtrace Headers Modules Resources; do ln -s "Versions/Current/$l" "$fw/$l"; done
	fi
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

# Dynamic frameworks. iOS: the archives linked whole; macOS: Go's c-shared again (only the link
# reruns, from Go's cache) with the versioned bundle's install name.
for name in ios-arm64 ios-simulator-arm64 ios-simulator-x86_64; do
	[ -f "$stage/$name/libmsgtrace.a" ] || continue
	case $name in
	ios-arm64) target=arm64-apple-ios$ios_min ;;
	ios-simulator-arm64) target=arm64-apple-ios$ios_min-simulator ;;
	ios-simulator-x86_64) target=x86_64-apple-ios$ios_min-simulator ;;
	esac
	fwlink "$target" "$stage/$name/libmsgtrace.a" "$tmp/$name.msgtrace"
done
if [ -f "$tmp/ios-arm64.msgtrace" ]; then
	framework "$stage/ios-arm64/msgtrace.framework" "$tmp/ios-arm64.msgtrace" iPhoneOS MinimumOSVersion "$ios_min"
fi
if [ -f "$tmp/ios-simulator-arm64.msgtrace" ] && [ -f "$tmp/ios-simulator-x86_64.msgtrace" ]; then
	$LIPO -create -output "$tmp/ios-simulator.msgtrace" "$tmp/ios-simulator-arm64.msgtrace" "$tmp/ios-simulator-x86_64.msgtrace"
	framework "$stage/ios-simulator/msgtrace.framework" "$tmp/ios-simulator.msgtrace" iPhoneSimulator MinimumOSVersion "$ios_min"
fi
mac=()
for name in macos-arm64 macos-x86_64; do
	[ -f "$stage/$name/libmsgtrace.dylib" ] || continue
	case $name in
	macos-arm64) build "$name framework" darwin arm64 "arm64-apple-macos$macos_min" c-shared "$tmp/$name/msgtrace" @rpath/msgtrace.framework/Versions/A/msgtrace ;;
	macos-x86_64) build "$name framework" darwin amd64 "x86_64-apple-macos$macos_min" c-shared "$tmp/$name/msgtrace" @rpath/msgtrace.framework/Versions/A/msgtrace ;;
	esac
	mac+=("$tmp/$name/msgtrace")
done
if [ ${#mac[@]} = 2 ]; then
	$LIPO -create -output "$tmp/macos.msgtrace" "${mac[@]}"
	framework "$stage/macos/msgtrace.framework" "$tmp/macos.msgtrace" MacOSX LSMinimumSystemVersion "$macos_min" versioned
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

# msgtrace.xcframework: the dynamic frameworks (as xcodebuild -create-xcframework -framework
# writes it: LibraryPath the bundle, BinaryPath its binary, no HeadersPath: the bundle has them).
if [ -d "$stage/ios-arm64/msgtrace.framework" ] && [ -d "$stage/ios-simulator/msgtrace.framework" ]; then
	xc=$stage/msgtrace.xcframework
	ids=(ios-arm64:ios-arm64 ios-arm64_x86_64-simulator:ios-simulator)
	[ -d "$stage/macos/msgtrace.framework" ] && ids+=(macos-arm64_x86_64:macos)
	for d in "${ids[@]}"; do
		mkdir -p "$xc/${d%%:*}"
		cp -a "$stage/${d#*:}/msgtrace.framework" "$xc/${d%%:*}/"
	done
	fwlib() { # ID BINARY-PATH PLATFORM VARIANT ARCHS...
		printf '\t\t<dict>\n\t\t\t<key>BinaryPath</key>\n\t\t\t<string>%s</string>\n' "$2"
		printf '\t\t\t<key>LibraryIdentifier</key>\n\t\t\t<string>%s</string>\n' "$1"
		printf '\t\t\t<key>LibraryPath</key>\n\t\t\t<string>msgtrace.framework</string>\n'
		printf '\t\t\t<key>SupportedArchitectures</key>\n\t\t\t<array>\n'
		printf '\t\t\t\t<string>%s</string>\n' "${@:5}"
		printf '\t\t\t</array>\n\t\t\t<key>SupportedPlatform</key>\n\t\t\t<string>%s</string>\n' "$3"
		[ -n "$4" ] && printf '\t\t\t<key>SupportedPlatformVariant</key>\n\t\t\t<string>%s</string>\n' "$4"
		printf '\t\t</dict>\n'
	}
	{
		printf '<?xml version="1.0" encoding="UTF-8"?>\n'
		printf '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
		printf '<plist version="1.0">\n<dict>\n\t<key>AvailableLibraries</key>\n\t<array>\n'
		fwlib ios-arm64 msgtrace.framework/msgtrace ios "" arm64
		fwlib ios-arm64_x86_64-simulator msgtrace.framework/msgtrace ios simulator arm64 x86_64
		[ -d "$xc/macos-arm64_x86_64" ] && fwlib macos-arm64_x86_64 msgtrace.framework/Versions/A/msgtrace macos "" arm64 x86_64
		printf '\t</array>\n\t<key>CFBundlePackageType</key>\n\t<string>XFWK</string>\n'
		printf '\t<key>XCFrameworkFormatVersion</key>\n\t<string>1.0</string>\n</dict>\n</plist>\n'
	} >"$xc/Info.plist"
fi

(cd "$stage" && find . -type f ! -name MANIFEST | sed 's|^\./||' | LC_ALL=C sort |
	while read -r f; do echo "$(sha256sum "$f" | cut -d' ' -f1) $(stat -c %s "$f") $f"; done >MANIFEST)
rm -rf "$out"
mv "$stage" "$out"
echo "cross: $(grep -c . "$out/MANIFEST") files in $out in $((SECONDS - t0)) s (listed in MANIFEST)"
