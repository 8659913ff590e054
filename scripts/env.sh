# Sourced by the scripts: where the pinned toolchain lives. Paths are absolute.
MSGTRACE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export MSGTRACE_ROOT
export ZIG_VERSION=0.14.0-dev.2456
export ZIG_SHA256=18547cc75dbf05fb305ee6629326c059505d2b86fa00aa046f144a8c358c61cd
export ZIG=$MSGTRACE_ROOT/.tools/zig/zig
export CLANG=clang-19
export OBJDUMP=llvm-objdump-19
export LIPO=llvm-lipo-19
export LD64=ld64.lld-19
export DSYMUTIL=dsymutil-19
export SDK=$MSGTRACE_ROOT/sdk
# zig keeps a cache; keep it inside the repo so CI's clean machine and `make clean` agree.
export ZIG_GLOBAL_CACHE_DIR=$MSGTRACE_ROOT/.tools/zig-cache
export ZIG_LOCAL_CACHE_DIR=$MSGTRACE_ROOT/.tools/zig-cache
