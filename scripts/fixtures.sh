#!/usr/bin/env bash
# Builds the Mach-O fixtures from testdata/src into OUTDIR (default testdata/fixtures):
#   {objc app (exe), objc lib (dylib), objc bundle} x {macOS arm64, macOS x86_64, iOS arm64,
#   iOS-simulator x86_64} x {chained fixups, classic dyld info} with clang-19 + ld64.lld-19,
#   classic exe and dylib again with zig cc (its own Mach-O linker; it cannot make bundles),
#   the libhelper dylibs they import from (2nd dependency, a thread-local -> __thread_ptrs),
#   universal files, object files (arm64 and arm64e), a dSYM and Go-built darwin executables.
# Every output is checked against its name with llvm-objdump and listed in OUTDIR/MANIFEST.
# Deterministic; cached: rebuilt only when the script, sources, SDK stubs or tools change.
set -euo pipefail
source "$(dirname "$0")/env.sh"
out=$(realpath -m "${1:-$MSGTRACE_ROOT/testdata/fixtures}")
src=$MSGTRACE_ROOT/testdata/src

stamp=$( { cat "$0" "$MSGTRACE_ROOT/scripts/env.sh"; find "$src" "$SDK" -type f | sort | xargs cat;
	$CLANG --version; "$ZIG" version; go version; } | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ] &&
	(cd "$out" && cut -d' ' -f1 MANIFEST | xargs ls >/dev/null 2>&1); then
	exit 0
fi
echo "fixtures: building into $out"
rm -rf "$out"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

common=(-O1 -g0 -fno-stack-protector -Wno-objc-root-class -ffile-prefix-map="$MSGTRACE_ROOT"=.
	-isysroot "$SDK" -I"$src")

# link NAME KIND STYLE TARGET SOURCE [inputs...]; STYLE chained|classic (clang+lld) or zig
link() {
	local name=$1 kind=$2 style=$3 target=$4 source=$5 k=(-L"$SDK/usr/lib")
	shift 5
	case $kind in
	dylib) k+=(-shared -Wl,-install_name,"@rpath/$name") ;;
	bundle) k+=(-bundle) ;;
	esac
	case $style in
	chained) $CLANG -target "$target" -fuse-ld=lld -nostdlib -Wl,-fixup_chains "${common[@]}" "${k[@]}" \
		-o "$out/$name" "$src/$source" "$@" -lSystem -lobjc ;;
	classic) $CLANG -target "$target" -fuse-ld=lld -nostdlib -Wl,-no_fixup_chains "${common[@]}" "${k[@]}" \
		-o "$out/$name" "$src/$source" "$@" -lSystem -lobjc ;;
	zig) "$ZIG" cc -target "$target" "${common[@]}" "${k[@]}" -o "$out/$name" "$src/$source" "$@" -lobjc ;;
	esac
}

# platform:clang-target:zig-target
for t in macos-arm64:arm64-apple-macos13:aarch64-macos.13.0 macos-x86_64:x86_64-apple-macos13:x86_64-macos.13.0 \
	ios-arm64:arm64-apple-ios15:aarch64-ios.15.0 ios-sim-x86_64:x86_64-apple-ios15-simulator:x86_64-ios.15.0-simulator; do
	IFS=: read -r plat ctarget ztarget <<<"$t"
	for style in chained classic zig; do
		target=$ctarget kinds="exe:objc_app.m dylib:objc_lib.m bundle:objc_bundle.m" suffix=$style
		[ $style = zig ] && target=$ztarget kinds="exe:objc_app.m dylib:objc_lib.m" suffix=classic-zig
		helper=libhelper-$plat-$suffix.dylib
		link "$helper" dylib $style "$target" helper.c
		for k in $kinds; do
			link "objc-$plat-${k%%:*}-$suffix" "${k%%:*}" $style "$target" "${k#*:}" "$out/$helper"
		done
	done
done

# universal (fat) files
$LIPO -create -output "$out/objc-macos-universal-exe-chained" "$out/objc-macos-arm64-exe-chained" "$out/objc-macos-x86_64-exe-chained"
$LIPO -create -output "$out/objc-macos-universal-dylib-classic" "$out/objc-macos-arm64-dylib-classic" "$out/objc-macos-x86_64-dylib-classic"

# object files (MH_OBJECT: relocations, no bind info); the arm64e one has pointer-auth code.
# (ld64.lld-19 links arm64e objects into plain arm64 images, so there is no linked arm64e fixture.)
$CLANG -target arm64-apple-macos13 "${common[@]}" -c -o "$out/objc-macos-arm64-object.o" "$src/objc_lib.m"
$CLANG -target arm64e-apple-ios15 "${common[@]}" -fptrauth-calls -fptrauth-returns -fptrauth-intrinsics \
	-c -o "$out/objc-ios-arm64e-object.o" "$src/objc_lib.m"

# a dSYM companion (MH_DSYM); relative object path and zero mtime in the stabs keep the UUID stable
(cd "$tmp" && export ZERO_AR_DATE=1 && $CLANG -target arm64-apple-macos13 "${common[@]/-g0/-g}" -fdebug-compilation-dir=. \
	-c -o debuglib.o "$src/objc_lib.m" &&
	$CLANG -target arm64-apple-macos13 -fuse-ld=lld -nostdlib -isysroot "$SDK" -L"$SDK/usr/lib" -shared \
		-Wl,-install_name,@rpath/debuglib,-oso_prefix,"$tmp/" -o debuglib debuglib.o "$out/libhelper-macos-arm64-chained.dylib" \
		-lSystem -lobjc && $DSYMUTIL -o debuglib.dSYM debuglib)
cp "$tmp/debuglib.dSYM/Contents/Resources/DWARF/debuglib" "$out/objc-macos-arm64-dsym"

# Go-built darwin executables (Go's internal linker)
for a in arm64 amd64; do
	(cd "$MSGTRACE_ROOT" && CGO_ENABLED=0 GOOS=darwin GOARCH=$a go build -trimpath -ldflags=-buildid= \
		-o "$out/go-macos-$a-exe" ./testdata/src/gohello)
done

# describe FILE -> "archs filetype fixups platform", read back from the file itself
describe() {
	local h archs
	h=$($OBJDUMP --macho --private-headers "$1")
	archs=$($LIPO -archs "$1" | xargs -n1 | sort | paste -sd,)
	printf '%s %s ' "$archs" "$(awk '$1 ~ /^MH_MAGIC/ { print $5; exit }' <<<"$h")"
	if grep -q LC_DYLD_CHAINED_FIXUPS <<<"$h"; then printf 'chained '
	elif grep -q 'LC_DYLD_INFO' <<<"$h"; then printf 'classic '
	else printf 'none '; fi
	awk '$1 == "platform" { print $2; exit }' <<<"$h" | grep . || echo unknown
}
# expect NAME -> the same, derived from the file name
expect() {
	local n=$1 a p t=unknown f=none
	case $n in *-universal-*) a=arm64,x86_64 ;; *-arm64e-*) a=arm64e ;; *-arm64-*) a=arm64 ;; *) a=x86_64 ;; esac
	case $n in *-ios-sim-*) p=iossimulator ;; *-ios-*) p=ios ;; *) p=macos ;; esac
	case $n in *-exe*) t=EXECUTE ;; *.dylib | *-dylib-*) t=DYLIB ;; *-bundle-*) t=BUNDLE ;; *.o) t=OBJECT ;; *-dsym) t=DSYM ;; esac
	case $n in *-chained*) f=chained ;; *-classic* | go-*) f=classic ;; esac
	echo "$a $t $f $p"
}
cd "$out"
for f in *; do
	got=$(describe "$f") want=$(expect "$f")
	[ "$got" = "$want" ] || { echo "fixtures: $f is '$got', its name says '$want'" >&2; exit 1; }
	case $f in objc-*-exe-* | objc-*-dylib-* | objc-*-bundle-*)
		# (zig's linker binds _helper_tls in __thread_ptrs but names another symbol there in
		# the indirect symbol table, so the TLV import is looked for in the bind info too)
		ind=$($OBJDUMP --macho --arch=all --indirect-symbols --bind "$f")
		for s in _objc_msgSend _objc_msgSendSuper2 _helper_tls; do
			grep -q " $s\$" <<<"$ind" || { echo "fixtures: $f does not import $s" >&2; exit 1; }
		done ;;
	esac
	echo "$f $got"
done >"$tmp/MANIFEST"
mv "$tmp/MANIFEST" MANIFEST
echo "$stamp" >.stamp
echo "fixtures: $(wc -l <MANIFEST) files checked, listed in $out/MANIFEST"
