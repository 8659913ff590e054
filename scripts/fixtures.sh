#!/usr/bin/env bash
# Builds the Mach-O fixtures from testdata/src into OUTDIR (default testdata/fixtures):
#   {objc app (executable), objc lib (dylib), objc bundle} x {macOS arm64, macOS x86_64,
#   iOS arm64, iOS-simulator x86_64} x {chained fixups, classic dyld info} with clang-19 +
#   ld64.lld-19, the same classic with zig cc (its own Mach-O linker) for macOS, the libhelper
#   dylibs they link, a universal file, an object file, a dSYM, Go-built darwin executables.
# Cached: rebuilt only when the script, the sources, the SDK stubs or the tools change.
set -euo pipefail
source "$(dirname "$0")/env.sh"
out=$(realpath -m "${1:-$MSGTRACE_ROOT/testdata/fixtures}")
src=$MSGTRACE_ROOT/testdata/src

stamp=$( { cat "$0" "$MSGTRACE_ROOT/scripts/env.sh"; find "$src" "$SDK" -type f | sort | xargs cat;
	$CLANG --version; "$ZIG" version; go version; } | sha256sum | cut -d' ' -f1)
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ]; then
	exit 0
fi
echo "fixtures: building into $out"
rm -rf "$out"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

common=(-O1 -g0 -fno-stack-protector -ffile-prefix-map="$MSGTRACE_ROOT"=. -Wno-objc-root-class -fobjc-runtime=macosx)

# clang_build NAME TARGET FIXUPFLAG KIND SOURCE [extra...]
clang_build() {
	local name=$1 target=$2 fix=$3 kind=$4 source=$5
	shift 5
	local kflags=()
	case $kind in
	exe) ;;
	dylib) kflags=(-dynamiclib -Wl,-install_name,"@rpath/$name.dylib") ;;
	bundle) kflags=(-bundle) ;;
	esac
	$CLANG -target "$target" -isysroot "$SDK" -fuse-ld=lld -nostdlib "${common[@]}" "${kflags[@]}" \
		-Wl,"$fix" -L"$SDK/usr/lib" -o "$out/$name" "$src/$source" "$@" -lSystem -lobjc
}

# clang: every target x fixup style x kind
for t in macos-arm64:arm64-apple-macos13 macos-x86_64:x86_64-apple-macos13 \
	ios-arm64:arm64-apple-ios15 ios-sim-x86_64:x86_64-apple-ios15-simulator; do
	plat=${t%%:*} target=${t#*:}
	for f in chained:-fixup_chains classic:-no_fixup_chains; do
		fs=${f%%:*} fflag=${f#*:}
		helper=libhelper-$plat-$fs.dylib
		clang_build "$helper" "$target" "$fflag" dylib helper.c
		# the dylib kind above named it NAME.dylib in its install name; keep the file name plain
		for k in exe:objc_app.m dylib:objc_lib.m bundle:objc_bundle.m; do
			kind=${k%%:*} source=${k#*:}
			clang_build "objc-$plat-$kind-$fs" "$target" "$fflag" "$kind" "$source" "$out/$helper" -I"$src"
		done
	done
done

# zig cc: classic dyld info from zig's own linker (macOS; it ships libSystem itself)
for t in macos-arm64:aarch64-macos macos-x86_64:x86_64-macos; do
	plat=${t%%:*} target=${t#*:}
	helper=libhelper-$plat-zig.dylib
	"$ZIG" cc -target "$target" -O1 -shared -Wl,-install_name,@rpath/$helper -o "$out/$helper" "$src/helper.c"
	# (zig cc has no -bundle: its bundles come from clang only)
	for k in exe:objc_app.m:"" dylib:objc_lib.m:-shared; do
		IFS=: read -r kind source kflag <<<"$k"
		"$ZIG" cc -target "$target" -O1 -Wno-objc-root-class -fobjc-runtime=macosx $kflag -I"$src" \
			-o "$out/objc-$plat-$kind-classic-zig" "$src/$source" "$out/$helper" "$SDK/usr/lib/libobjc.tbd"
	done
done
rm -f "$out"/*.o

# a universal (fat) executable and dylib
$LIPO -create -output "$out/objc-macos-universal-exe-chained" "$out/objc-macos-arm64-exe-chained" "$out/objc-macos-x86_64-exe-chained"
$LIPO -create -output "$out/objc-macos-universal-dylib-classic" "$out/objc-macos-arm64-dylib-classic" "$out/objc-macos-x86_64-dylib-classic"

# an object file (MH_OBJECT: pointer sections with no bind info yet) and a dSYM companion file
$CLANG -target arm64-apple-macos13 "${common[@]}" -c -I"$src" -o "$out/objc-macos-arm64-object.o" "$src/objc_lib.m"
$CLANG -target arm64-apple-macos13 -isysroot "$SDK" -fuse-ld=lld -nostdlib "${common[@]/-g0/-g}" -I"$src" \
	-L"$SDK/usr/lib" -o "$tmp/debugapp" "$src/objc_lib.m" -dynamiclib -lSystem -lobjc "$out/libhelper-macos-arm64-chained.dylib"
if command -v dsymutil-19 >/dev/null && (cd "$tmp" && dsymutil-19 -o debugapp.dSYM debugapp >/dev/null 2>&1); then
	cp "$tmp"/debugapp.dSYM/Contents/Resources/DWARF/debugapp "$out/objc-macos-arm64-dsym"
fi

# Go-built darwin executables (Go's internal linker)
for a in arm64 amd64; do
	(cd "$MSGTRACE_ROOT" && CGO_ENABLED=0 GOOS=darwin GOARCH=$a go build -trimpath -ldflags=-buildid= \
		-o "$out/go-macos-$a-exe" ./testdata/src/gohello)
done

# Check each fixture is what its name says.
for f in "$out"/objc-*-chained "$out"/objc-*-classic "$out"/objc-*-classic-zig; do
	hdrs=$($OBJDUMP --macho --private-headers "$f")
	case $f in
	*-chained) grep -q LC_DYLD_CHAINED_FIXUPS <<<"$hdrs" || { echo "$f: no chained fixups" >&2; exit 1; } ;;
	*) grep -q LC_DYLD_INFO <<<"$hdrs" || { echo "$f: no dyld info" >&2; exit 1; } ;;
	esac
	$OBJDUMP --macho --indirect-symbols "$f" | grep -q '_objc_msgSend$' || { echo "$f: no _objc_msgSend import" >&2; exit 1; }
	$OBJDUMP --macho --indirect-symbols "$f" | grep -q '_objc_msgSendSuper2$' || { echo "$f: no _objc_msgSendSuper2 import" >&2; exit 1; }
done

echo "$stamp" >"$out/.stamp"
echo "fixtures: $(ls "$out" | wc -l) files"
