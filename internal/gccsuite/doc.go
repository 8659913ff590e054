// Package gccsuite runs GCC's own Objective-C execution tests under the library: the sources
// of gcc/testsuite/objc/execute and the `dg-do run` tests of gcc/testsuite/objc.dg, from
// Debian's gcc-12-source package (a tarball under /usr/src/gcc-12 that scripts/setup.sh
// installs, unpacked at test time into bin/gccsuite, never committed), built with Debian's gcc
// and gobjc on gcc's GNU runtime, run untraced and then preloaded with libmsgtrace-preload.so
// in four configurations (the defaults, MSGTRACE_METHODS=all, MSGTRACE_MODE=ring,
// MSGTRACE_MIN_US) with the same output and exit status, each trace read back and checked.
//
// Everything is in the tests: the directives of GCC's DejaGnu harness that decide how a test
// is built and whether it runs here (dg_test.go) and the run itself (gccsuite_linux_test.go).
package gccsuite
