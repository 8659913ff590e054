#!/usr/bin/env bash
# Builds the Linux end-to-end test app for ARCH (amd64|arm64) into OUTDIR: libtobjc.so (a small
# Objective-C runtime), libtplugin.so (loaded later with dlopen) and testapp, a glibc dynamic
# C++ program with RUNPATH $ORIGIN. UNWINDER picks its C++ runtime and unwinder:
#   libunwind (default): LLVM's libc++/libc++abi/libunwind, statically linked, the unwinder
#     Apple platforms ship: clang-19 with Debian's archives on amd64, zig c++ for
#     aarch64-linux-gnu on arm64
#   libgcc: libstdc++ and libgcc_s, Linux's default (every GNUstep program's): g++ on amd64,
#     aarch64-linux-gnu-g++ on arm64
# arm64 programs run under qemu-aarch64 -L /usr/aarch64-linux-gnu.
set -euo pipefail
source "$(dirname "$0")/env.sh"
usage="usage: testapp.sh amd64|arm64 OUTDIR [libunwind|libgcc]"
arch=${1:?$usage}
out=${2:?$usage}
unwinder=${3:-libunwind}
src=$MSGTRACE_ROOT/testdata/objcapp
mkdir -p "$out"
flags=(-O1 -g -fno-omit-frame-pointer -I"$src")
case $arch in
amd64)
	cc=(clang-19 --target=x86_64-linux-gnu)
	cxx=(clang++-19 --target=x86_64-linux-gnu -stdlib=libc++ -unwindlib=libunwind -rtlib=compiler-rt
		-static-libstdc++ -static-libgcc)
	asm=tobjc_amd64.S
	;;
arm64)
	cc=("$ZIG" cc -target aarch64-linux-gnu.2.36)
	cxx=("$ZIG" c++ -target aarch64-linux-gnu.2.36)
	asm=tobjc_arm64.S
	;;
*)
	echo "testapp.sh: unknown architecture $arch (amd64 or arm64)" >&2
	exit 2
	;;
esac
case $unwinder in
libunwind) ;;
libgcc)
	cxx=(g++)
	[ "$arch" = amd64 ] || cxx=(aarch64-linux-gnu-g++)
	;;
*)
	echo "testapp.sh: unknown unwinder $unwinder (libunwind or libgcc)" >&2
	exit 2
	;;
esac
"${cc[@]}" "${flags[@]}" -fPIC -shared -Wl,-soname,libtobjc.so -o "$out/libtobjc.so" "$src/tobjc.c" "$src/$asm" -lpthread
"${cc[@]}" "${flags[@]}" -fPIC -shared -Wl,-soname,libtplugin.so -o "$out/libtplugin.so" "$src/plugin.c" \
	-L"$out" -ltobjc
"${cc[@]}" "${flags[@]}" -o "$out/stress" "$src/stress.c" -L"$out" -ltobjc -lpthread \
	-Wl,--enable-new-dtags,-rpath,'$ORIGIN'
"${cxx[@]}" "${flags[@]}" -o "$out/testapp" "$src/testapp.cpp" -L"$out" -ltobjc -lpthread -ldl \
	-Wl,--enable-new-dtags,-rpath,'$ORIGIN'
