package msgtrace

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/machobind"
)

// A C type in the torture suite: its declaration, how to build a value from a seed and how to
// fold a value into the hash.
type ctype struct {
	name  string
	make  func(seed string) string // C expression
	fold  func(v string) string    // C statement adding v into h
	isRet bool
}

var scalar = func(name string) ctype {
	return ctype{name: name, make: func(s string) string { return fmt.Sprintf("(%s)(%s)", name, s) },
		fold: func(v string) string { return fmt.Sprintf("h = mix(h, (uint64_t)(%s));", v) }}
}

var floating = func(name string) ctype {
	return ctype{name: name, make: func(s string) string { return fmt.Sprintf("(%s)((double)(%s) / 7.0)", name, s) },
		fold: func(v string) string { return fmt.Sprintf("h = mixf(h, (double)(%s));", v) }}
}

var tortureTypes = []ctype{
	scalar("int8_t"), scalar("int16_t"), scalar("int32_t"), scalar("int64_t"), scalar("uint64_t"),
	floating("float"), floating("double"), floating("long double"),
	{name: "v128", make: func(s string) string { return fmt.Sprintf("mkv(%s)", s) },
		fold: func(v string) string { return fmt.Sprintf("h = mixv(h, %s);", v) }},
	{name: "struct small", make: func(s string) string { return fmt.Sprintf("(struct small){(int32_t)(%s), (int32_t)(%s) + 1}", s, s) },
		fold: func(v string) string { return fmt.Sprintf("h = mix(mix(h, %s.a), %s.b);", v, v) }},
	{name: "struct mixed", make: func(s string) string { return fmt.Sprintf("(struct mixed){(double)(%s) / 3.0, (int64_t)(%s)}", s, s) },
		fold: func(v string) string { return fmt.Sprintf("h = mix(mixf(h, %s.d), %s.i);", v, v) }},
	{name: "struct hfa", make: func(s string) string {
		return fmt.Sprintf("(struct hfa){(double)(%s), 1.5, -2.25, (double)(%s) * 2}", s, s)
	},
		fold: func(v string) string {
			return fmt.Sprintf("h = mixf(mixf(mixf(mixf(h, %s.a), %s.b), %s.c), %s.d);", v, v, v, v)
		}},
	{name: "struct big", make: func(s string) string {
		return fmt.Sprintf("(struct big){{(int64_t)(%s), 2, 3, 4, (int64_t)(%s) * 5}}", s, s)
	},
		fold: func(v string) string { return fmt.Sprintf("for (int k = 0; k < 5; k++) h = mix(h, %s.x[k]);", v) }},
}

// returns: the return type, the interposer to call through, how to build it from h, and how to
// compare two results bit for bit.
type rtype struct {
	name, via, make, cmp string
}

var tortureReturns = []rtype{
	{"void", "objc_msgSend", "", ""},
	{"int64_t", "objc_msgSend", "(int64_t)h", "a == b"},
	{"double", "objc_msgSend", "(double)(h >> 11)", "memcmp(&a, &b, 8) == 0"},
	{"float", "objc_msgSend", "(float)(h >> 40)", "memcmp(&a, &b, 4) == 0"},
	{"v128", "objc_msgSend", "mkv(h)", "memcmp(&a, &b, 16) == 0"},
	{"struct small", "objc_msgSend", "(struct small){(int32_t)h, (int32_t)(h >> 32)}", "memcmp(&a, &b, 8) == 0"},
	{"struct mixed", "objc_msgSend", "(struct mixed){(double)(h >> 12), (int64_t)h}", "memcmp(&a, &b, 16) == 0"},
	{"struct hfa", "objc_msgSend_stret", "(struct hfa){(double)h, (double)(h >> 1), (double)(h >> 2), (double)(h >> 3)}", "memcmp(&a, &b, 32) == 0"},
	{"struct big", "objc_msgSend_stret", "(struct big){{(int64_t)h, (int64_t)(h >> 1), 3, 4, 5}}", "memcmp(&a, &b, 40) == 0"},
	{"long double", "objc_msgSend_fpret", "(long double)h / 3", "memcmp(&a, &b, 10) == 0"},
	{"_Complex long double", "objc_msgSend_fp2ret", "(long double)h / 3 + 1.0iL * (long double)(h >> 3)", "memcmp(&a, &b, 10) == 0 && memcmp((char *)&a + 16, (char *)&b + 16, 10) == 0"},
}

const tortureHeader = `#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdarg.h>
#include <pthread.h>
#include "rt.h"

typedef long long v128 __attribute__((vector_size(16)));
struct small { int32_t a, b; };
struct mixed { double d; int64_t i; };
struct hfa { double a, b, c, d; };
struct big { int64_t x[5]; };
struct method { void *sel; void *imp; };
struct class { struct class *super; struct method *methods; };
struct object { struct class *isa; };
struct objc_super { struct object *receiver; struct class *cls; };

void test_msgSend(void), test_msgSend_stret(void), test_msgSendSuper2(void), test_msgSendSuper2_stret(void);
uint64_t callee_saved_probe(void *fn, void *obj, void *sel);

static uint64_t mix(uint64_t h, uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); return h * 0xff51afd7ed558ccdULL; }
static uint64_t mixf(uint64_t h, double d) { uint64_t u; memcpy(&u, &d, 8); return mix(h, u); }
static uint64_t mixv(uint64_t h, v128 v) { return mix(mix(h, (uint64_t)v[0]), (uint64_t)v[1]); }
static v128 mkv(uint64_t s) { v128 v = {(long long)s, (long long)(s * 3)}; return v; }
static int failures;
#define CHECK(name, cond) do { if (!(cond)) { printf("FAIL %s\n", name); failures++; } } while (0)
`

// generateTorture writes a C program with n generated cases: each a method with a random
// signature, called directly and through the interposer, results compared bit for bit. With
// methods, each method is instrumented with trampoline i (implementing class implcls) and called
// directly, through its trampoline, and through the interposer whose dispatcher lands in the
// trampoline (one record, named by implcls); every record is checked.
func generateTorture(n int, seed uint64, arch string, viaMethods bool) string {
	rng := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	b.WriteString(tortureHeader)
	if viaMethods {
		b.WriteString(tortureMethodsHeader)
	}
	var methods, calls strings.Builder
	for i := 0; i < n; i++ {
		ret := tortureReturns[i%len(tortureReturns)]
		if arch == "arm64" {
			// one entry point for every signature (x8 carries indirect results); long double is
			// IEEE quad, compared in full
			ret.via = "objc_msgSend"
			ret.cmp = strings.ReplaceAll(ret.cmp, ", 10)", ", 16)")
		}
		var params, args []string
		var body strings.Builder
		nargs := rng.IntN(13)
		mode := rng.IntN(3) // 0 mixed, 1 integers only, 2 floating only
		for j := 0; j < nargs; j++ {
			var t ctype
			switch mode {
			case 1:
				t = tortureTypes[rng.IntN(5)]
			case 2:
				t = tortureTypes[5+rng.IntN(3)]
			default:
				t = tortureTypes[rng.IntN(len(tortureTypes))]
			}
			params = append(params, fmt.Sprintf("%s a%d", t.name, j))
			args = append(args, t.make(fmt.Sprintf("%d", rng.Int64N(1<<40)-1<<39)))
			body.WriteString("\t" + t.fold(fmt.Sprintf("a%d", j)) + "\n")
		}
		sig := strings.Join(append([]string{"struct object *self", "void *cmd"}, params...), ", ")
		fmt.Fprintf(&methods, "static %s m%d(%s) {\n\tuint64_t h = %d; (void)self; (void)cmd;\n%s", ret.name, i, sig, i, body.String())
		if ret.name == "void" {
			fmt.Fprintf(&methods, "\tsink = h;\n}\n")
		} else {
			fmt.Fprintf(&methods, "\treturn %s;\n}\n", ret.make)
		}
		ptypes := []string{"struct object *", "void *"}
		for _, p := range params {
			ptypes = append(ptypes, p[:strings.LastIndex(p, " ")])
		}
		fnType := fmt.Sprintf("%s (*)(%s)", ret.name, strings.Join(ptypes, ", "))
		callArgs := strings.Join(append([]string{"obj", fmt.Sprintf("(void *)%d", 1000+i)}, args...), ", ")
		callees := []string{"msgtrace_" + ret.via}
		if viaMethods {
			callees = []string{fmt.Sprintf("TRAMP(%d)", i), "msgtrace_" + ret.via}
		}
		for _, callee := range callees {
			name := fmt.Sprintf("case %d (%s, %d args) via %s", i, ret.name, nargs, callee)
			if ret.name == "void" {
				fmt.Fprintf(&calls, "\tsink = 0; m%d(%s); { uint64_t a = sink; sink = 0; ((%s)%s)(%s); uint64_t b = sink; CHECK(%q, a == b); }\n",
					i, callArgs, fnType, callee, callArgs, name)
			} else {
				fmt.Fprintf(&calls, "\t{ %s a = m%d(%s); %s b = ((%s)%s)(%s); CHECK(%q, %s); }\n",
					ret.name, i, callArgs, ret.name, fnType, callee, callArgs, name, ret.cmp)
			}
			fmt.Fprintf(&calls, "\texpected++;\n")
		}
	}
	b.WriteString("static volatile uint64_t sink;\n")
	b.WriteString(methods.String())
	// variadic: al must reach the callee, or va_arg reads garbage doubles
	b.WriteString(`static double mva(struct object *self, void *cmd, int n, ...) {
	va_list ap; va_start(ap, n); double s = 0;
	for (int i = 0; i < n; i++) s = s * 3 + (i % 2 ? va_arg(ap, double) : (double)va_arg(ap, int64_t));
	va_end(ap); (void)self; (void)cmd; return s;
}
`)
	fmt.Fprintf(&b, "static struct method methods[%d];\n", n+2)
	b.WriteString("static struct class cls = {0, methods};\nstatic struct object object = {&cls};\n")
	b.WriteString("int main(void) {\n\tstruct object *obj = &object; uint64_t expected = 0;\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "\tmethods[%d] = (struct method){(void *)%d, (void *)m%d};\n", i, 1000+i, i)
	}
	fmt.Fprintf(&b, "\tmethods[%d] = (struct method){(void *)999, (void *)mva};\n", n)
	if viaMethods {
		// trampoline i stands in for method i (the variadic one is n) in the dispatch table
		fmt.Fprintf(&b, "\tfor (int i = 0; i <= %d; i++) { msgtrace_tramp_data[i] = (struct mt_tramp_data){methods[i].imp, &implcls, methods[i].sel, 0}; methods[i].imp = TRAMP(i); }\n", n)
	}
	b.WriteString(`	msgtrace_orig_objc_msgSend = msgtrace_orig_objc_msgSend_fpret = msgtrace_orig_objc_msgSend_fp2ret = (void *)test_msgSend;
	msgtrace_orig_objc_msgSend_stret = (void *)test_msgSend_stret;
	msgtrace_orig_objc_msgSendSuper2 = (void *)test_msgSendSuper2;
	msgtrace_orig_objc_msgSendSuper2_stret = (void *)test_msgSendSuper2_stret;
	msgtrace_active = 1;
`)
	b.WriteString(calls.String())
	b.WriteString(`	{ double a = mva(obj, (void *)999, 7, (int64_t)1, 2.5, (int64_t)3, 4.25, (int64_t)5, 6.125, (int64_t)7);
	  double b = ((double (*)(struct object *, void *, int, ...))msgtrace_objc_msgSend)(obj, (void *)999, 7, (int64_t)1, 2.5, (int64_t)3, 4.25, (int64_t)5, 6.125, (int64_t)7);
	  CHECK("variadic", memcmp(&a, &b, 8) == 0); expected++; }
	CHECK("callee-saved registers", callee_saved_probe((void *)msgtrace_objc_msgSend, obj, (void *)1000) == 0); expected++;
	CHECK("nil receiver", ((int64_t (*)(void *, void *))msgtrace_objc_msgSend)(0, (void *)1001) == 0);
`)
	if viaMethods {
		fmt.Fprintf(&b, `	{ double a = mva(obj, (void *)999, 7, (int64_t)1, 2.5, (int64_t)3, 4.25, (int64_t)5, 6.125, (int64_t)7);
	  double b = ((double (*)(struct object *, void *, int, ...))TRAMP(%d))(obj, (void *)999, 7, (int64_t)1, 2.5, (int64_t)3, 4.25, (int64_t)5, 6.125, (int64_t)7);
	  CHECK("variadic via trampoline", memcmp(&a, &b, 8) == 0); expected++; }
	CHECK("callee-saved registers via trampoline", callee_saved_probe(TRAMP(0), obj, (void *)1000) == 0); expected++;
	msgtrace_visit(check_records, 0);
	CHECK("every record named by the implementing class, once", named == expected);
`, n)
	}
	b.WriteString(`	struct mt_counters c; msgtrace_counters(&c);
	CHECK("every interposed call recorded", c.recorded == expected && c.dropped == 0 && c.overflow == 0);
	printf("%s %llu cases, %llu recorded\n", failures ? "FAILED" : "OK", (unsigned long long)expected, (unsigned long long)c.recorded);
	return failures != 0;
}
`)
	return b.String()
}

// tortureMethodsHeader: what the methods variant of the torture program adds.
const tortureMethodsHeader = `#include "trampoline.h"
#define TRAMP(i) ((void *)(msgtrace_tramp_text + (i) * MT_STRIDE))
static struct class implcls;
static uint64_t named;
static void check_records(void *ctx, uint64_t tid, const struct mt_record *r, uint64_t n, uint64_t dropped, uint64_t overflow) {
	(void)ctx, (void)tid, (void)dropped, (void)overflow;
	for (uint64_t i = 0; i < n; i++) {
		int ok = (r[i].cls & ((1ULL << CLS_BITS) - 1)) == (uint64_t)&implcls && (r[i].cls >> FLAG_SHIFT) == 0 &&
			(r[i].sel == 999 || (r[i].sel >= 1000 && r[i].sel < 2000));
		if (!ok) printf("FAIL record %llu: cls %#llx sel %llu\n", (unsigned long long)i, (unsigned long long)r[i].cls, (unsigned long long)r[i].sel);
		named += ok;
	}
}
`

// target is an architecture the interposer tests run on: amd64 natively, arm64 under
// qemu-aarch64 (static binaries from the aarch64 cross gcc).
type target struct {
	arch, cc string
	flags    []string
	run      []string
}

var targets = []target{
	{arch: "amd64", cc: "gcc"},
	{arch: "arm64", cc: "aarch64-linux-gnu-gcc", flags: []string{"-static"}, run: []string{"qemu-aarch64"}},
}

// recorderSources are the C files of the recorder (rt*.c), the drain (drain*.c) and the
// Objective-C runtime binding they name methods through (objc/runtime.c): what a test program
// links with the interposers.
func recorderSources(t *testing.T) []string {
	t.Helper()
	rt, err := filepath.Glob("rt*.c")
	if err != nil {
		t.Fatal(err)
	}
	drain, err := filepath.Glob("drain*.c")
	if err != nil || len(rt) == 0 || len(drain) == 0 {
		t.Fatalf("recorder sources: %v %v %v", rt, drain, err)
	}
	return append(append(rt, drain...), "objc/runtime.c")
}

// buildC compiles a test program with the interposer, its runtime and the test dispatcher.
func (tg target) buildC(t *testing.T, name, src string, extra ...string) string {
	t.Helper()
	dir := t.TempDir()
	c := filepath.Join(dir, name+".c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	args := append(append(append([]string{"-O2", "-g", "-Wall", "-Wno-unused-function", "-Wno-cast-function-type", "-I.", "-Itestdata/interposer", "-o", bin, c},
		recorderSources(t)...), "msgsend_"+tg.arch+".S", "testdata/interposer/runtime_"+tg.arch+".S", "-lpthread", "-ldl"), tg.flags...)
	if out, err := exec.Command(tg.cc, append(args, extra...)...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", tg.cc, err, out)
	}
	return bin
}

func (tg target) command(bin string, args ...string) *exec.Cmd {
	all := append(append(append([]string{}, tg.run...), bin), args...)
	return exec.Command(all[0], all[1:]...)
}

func buildC(t *testing.T, name, src string, extra ...string) string {
	return targets[0].buildC(t, name, src, extra...)
}

func forTargets(t *testing.T, fn func(t *testing.T, tg target)) {
	for _, tg := range targets {
		t.Run(tg.arch, func(t *testing.T) {
			if len(tg.run) > 0 {
				testfiles.Slow(t, "runs under "+tg.run[0])
				testfiles.NeedTools(t, tg.cc, tg.run[0])
			} else {
				testfiles.NeedTools(t, tg.cc)
			}
			fn(t, tg)
		})
	}
}

// TestABITorture runs 400 generated signatures directly and through the interposer.
func TestABITorture(t *testing.T) {
	forTargets(t, func(t *testing.T, tg target) {
		bin := tg.buildC(t, "torture", generateTorture(400, 7, tg.arch, false))
		out, err := tg.command(bin).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "OK") {
			t.Fatalf("torture: %v\n%s", err, out)
		}
		t.Log(strings.TrimSpace(string(out)))
	})
}

// TestABITortureMethods runs 150 generated signatures through the method trampolines: directly
// (trampoline alone) and through the interposer landing in the trampoline (recorded once, named
// by the implementing class); callee-saved registers poisoned and checked.
func TestABITortureMethods(t *testing.T) {
	forTargets(t, func(t *testing.T, tg target) {
		bin := tg.buildC(t, "torture_methods", generateTorture(150, 11, tg.arch, true), "trampoline_"+tg.arch+".S")
		out, err := tg.command(bin).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "OK") {
			t.Fatalf("torture: %v\n%s", err, out)
		}
		t.Log(strings.TrimSpace(string(out)))
	})
}

// TestMethodsAndSends: a send the interposer records that lands in an instrumented method is
// one call named by the implementing class; a traced method tail-calling an instrumented one
// nests it; stopped, trampolines only forward (testdata/interposer/methods.c).
func TestMethodsAndSends(t *testing.T) {
	forTargets(t, func(t *testing.T, tg target) {
		runC(t, tg, tg.buildC(t, "methods", readFile(t, "testdata/interposer/methods.c"), "trampoline_"+tg.arch+".S"))
	})
}

// TestTaggedReceivers: a tagged-pointer receiver whose high bits are set (Apple's MSB and
// split layouts, obfuscated payloads) is recorded as a call of the right depth with only the
// tagged flag, and the bits that decide its class come back (testdata/interposer/tagged.c).
func TestTaggedReceivers(t *testing.T) {
	forTargets(t, func(t *testing.T, tg target) {
		runC(t, tg, tg.buildC(t, "tagged", readFile(t, "testdata/interposer/tagged.c")))
	})
}

// TestAppleMethods runs method capture's Apple path (methods.c, methods_tramps.c and methods_images.c built with
// MT_APPLE_API) against a stand-in for objc4's API with its documented behaviour (testdata/interposer/objc4.c): categories, the
// non-recursive runtime lock held around objc_addLoadImageFunc's callbacks, class_addMethod
// and objc_registerClassPair rebound, restore where the IMP is still ours, reinstall; launch as
// dyld and objc4 run it (the library's initializer between the images' mapping and the app's
// +load methods): a class's and a category's +load, the +initialize and the messages they send
// traced once, nested, before main; the app's category on a class of the system, its +load
// included, at the default selection; a +load that loads a plugin; then ("busy") a +load whose
// 200,000 sends fill a 64 KiB pool while the drain streams them: it waits, nothing is dropped.
// The runtime is found with dlsym, as on a device: the native build only (the arm64 one is
// static, for qemu); the trampolines themselves are checked on both by TestABITortureMethods.
func TestAppleMethods(t *testing.T) {
	tg := targets[0]
	bin := tg.buildC(t, "objc4", readFile(t, "testdata/interposer/objc4.c"), "trampoline_"+tg.arch+".S", "methods.c", "methods_tramps.c", "methods_images.c", "methods_modules.c", "hops.c", "-DMT_APPLE_API=1", "-rdynamic")
	runC(t, tg, bin)
	out, err := tg.command(bin, "busy", filepath.Join(t.TempDir(), "busy.mtrace")).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "OK") || strings.Contains(string(out), "FAIL") {
		t.Fatalf("objc4 busy: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}

func runC(t *testing.T, tg target, bin string) string {
	t.Helper()
	out, err := tg.command(bin).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK") || strings.Contains(string(out), "FAIL") {
		t.Fatalf("%s: %v\n%s", filepath.Base(bin), err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
	return string(out)
}

func readFile(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestThreadsRecursionLongjmp: 8 threads x 1,000,000 calls counted exactly, recursion past the
// shadow stack, longjmp over traced frames.
func TestThreadsRecursionLongjmp(t *testing.T) {
	forTargets(t, func(t *testing.T, tg target) {
		runC(t, tg, tg.buildC(t, "threads", readFile(t, "testdata/interposer/threads.c")))
	})
}

// unwinder is one way the exception test program is linked: which C++ runtime and unwinder
// it uses, and how it is built for each architecture.
type unwinder struct {
	name  string
	build func(t *testing.T, tg target, bin string, srcs []string) *exec.Cmd
}

var unwinders = []unwinder{
	// libgcc's unwinder with libstdc++ (g++'s default, and every GNUstep program's): libgcc_s
	// on amd64, libgcc_eh in a static program on arm64
	{"libgcc", func(t *testing.T, tg target, bin string, srcs []string) *exec.Cmd {
		cxx := map[string]string{"amd64": "g++", "arm64": "aarch64-linux-gnu-g++"}[tg.arch]
		return exec.Command(cxx, append(append([]string{"-O2", "-g"}, tg.flags...), append(append([]string{"-o", bin}, srcs...), "-lpthread")...)...)
	}},
	// LLVM's libunwind and libc++abi, the unwinder Apple platforms ship: clang++-19 with
	// Debian's libunwind 19 on amd64, zig's bundled libc++/libunwind (static, musl) on arm64.
	// glibc's pthread_exit unwinds with libgcc_s whatever the program links: skipped there.
	{"libunwind", func(t *testing.T, tg target, bin string, srcs []string) *exec.Cmd {
		if tg.arch == "amd64" {
			return exec.Command("clang++-19", append([]string{"-O2", "-g", "-stdlib=libc++", "-unwindlib=libunwind", "-rtlib=compiler-rt",
				"-DFORCED_UNWIND=0", "-o", bin}, append(srcs, "-lpthread")...)...)
		}
		zig := filepath.Join(testfiles.Root(t), ".tools", "zig", "zig")
		return exec.Command(zig, append([]string{"c++", "-target", "aarch64-linux-musl", "-O2", "-g", "-o", bin}, srcs...)...)
	}},
}

// TestCxxExceptionThroughInterposer: C++ exceptions, forced unwinds (pthread_exit,
// pthread_cancel), backtraces and longjmp across traced calls (testdata/interposer/
// exceptions.cpp: cleanups in traced methods, the handler in the caller, two sends up and in
// main, nested return stubs from tail calls, a rethrow, 1000 throws, all on two threads), under
// libgcc's unwinder and LLVM's libunwind, on amd64 and arm64. apple-cfi builds the return
// stubs with the unwind rows the Apple targets get and runs them under LLVM's libunwind.
func TestCxxExceptionThroughInterposer(t *testing.T) {
	forTargets(t, func(t *testing.T, tg target) {
		for _, uw := range unwinders {
			for _, cfi := range []string{"elf-cfi", "apple-cfi"} {
				if cfi == "apple-cfi" && uw.name != "libunwind" {
					continue // libgcc aborts on those rows: the reason the ELF rows differ
				}
				t.Run(uw.name+"/"+cfi, func(t *testing.T) {
					if uw.name == "libunwind" && tg.arch == "amd64" {
						testfiles.NeedTools(t, "clang++-19")
					}
					bin := filepath.Join(t.TempDir(), "exceptions")
					srcs := []string{"-I.", "-Itestdata/interposer", "testdata/interposer/exceptions.cpp"}
					for _, c := range recorderSources(t) {
						srcs = append(srcs, "-x", "c", c) // one -x each: g++ compiles a second .c as C++
					}
					srcs = append(srcs, "-x", "assembler-with-cpp", "msgsend_"+tg.arch+".S", "testdata/interposer/runtime_"+tg.arch+".S")
					if cfi == "apple-cfi" {
						srcs = append([]string{"-DMSGTRACE_APPLE_CFI"}, srcs...)
					}
					cmd := uw.build(t, tg, bin, srcs)
					if out, err := cmd.CombinedOutput(); err != nil {
						t.Fatalf("%s: %v\n%s", cmd.Path, err, out)
					}
					runC(t, tg, bin)
				})
			}
		}
	})
}

// gdbSession is what TestGDBBacktraceThroughInterposer asks gdb, after stopping in leaf
// (testdata/interposer/backtrace.c): the backtrace, finish (out of the method into the
// return stub), next (out of the stub into main, onto the next line, the second send), next
// (over that traced send), and the value it returned.
var gdbSession = []string{"break leaf", "bt 6", "finish", "next", "next", "print s"}

// TestGDBBacktraceThroughInterposer: from a breakpoint inside a traced method, gdb walks
// through the return stub's CFI (return address in the shadow stack) to the caller, finishes
// the method and steps back into the caller and over a traced send — natively on amd64,
// through qemu-aarch64's gdb port with gdb-multiarch on arm64.
//
// The rendering accepted: #0 the method; #1 the return stub, which gdb shows as
// `<signal handler called>` on ELF (its FDE is a signal frame, see msgsend_amd64.S); #2 the
// caller at the line of the send (the pc shown is inside the call instruction: the stub's
// rows give the return address minus 1). `finish` stops in the stub with the method's value;
// `next` from there reaches the caller's next line. (`finish` from the stub frame itself
// does not stop: gdb plants its breakpoint at the unwound pc, inside the call instruction.)
func TestGDBBacktraceThroughInterposer(t *testing.T) {
	forTargets(t, func(t *testing.T, tg target) {
		testfiles.NeedTools(t, map[string]string{"amd64": "gdb", "arm64": "gdb-multiarch"}[tg.arch])
		bin := tg.buildC(t, "backtrace", readFile(t, "testdata/interposer/backtrace.c"), "-O0")
		var out []byte
		var err error
		var script []string
		for _, c := range gdbSession {
			script = append(script, "-ex", c)
			if c == "break leaf" {
				script = append(script, "-ex", map[string]string{"amd64": "run", "arm64": "continue"}[tg.arch])
			}
		}
		if tg.arch == "amd64" {
			out, err = exec.Command("gdb", append(append([]string{"-nx", "-batch"}, script...), bin)...).CombinedOutput()
		} else {
			l, lerr := net.Listen("tcp", "127.0.0.1:0")
			if lerr != nil {
				t.Fatal(lerr)
			}
			port := l.Addr().(*net.TCPAddr).Port
			l.Close()
			q := exec.Command("qemu-aarch64", "-g", strconv.Itoa(port), bin)
			if err := q.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { q.Process.Kill(); q.Wait() }()
			// wait for qemu's gdb stub to listen (it takes one connection only: don't probe it)
			listening := fmt.Sprintf(":%04X 00000000:0000 0A", port)
			for i := 0; ; i++ {
				if b, _ := os.ReadFile("/proc/net/tcp"); strings.Contains(string(b), listening) {
					break
				}
				if i == 600 { // 30 s: qemu on a loaded machine
					t.Fatal("qemu's gdb stub did not come up")
				}
				time.Sleep(50 * time.Millisecond)
			}
			out, err = exec.Command("gdb-multiarch", append([]string{"-nx", "-batch", "-ex", "set architecture aarch64", "-ex", "file " + bin,
				"-ex", fmt.Sprintf("target remote 127.0.0.1:%d", port)}, script...)...).CombinedOutput()
		}
		if err != nil {
			t.Fatalf("gdb: %v\n%s", err, out)
		}
		var frames []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "#") {
				frames = append(frames, l)
			}
		}
		// #0 leaf, #1 the return stub, #2 main (the caller) at the line of the send
		if len(frames) < 3 || !strings.Contains(frames[0], "leaf") || !strings.Contains(frames[1], "<signal handler called>") ||
			!strings.Contains(frames[2], "main") || !strings.Contains(frames[2], "backtrace.c:21") {
			t.Fatalf("backtrace does not reach the caller through the interposer:\n%s", out)
		}
		t.Log(strings.Join(frames, "\n"))
		// finish: the method's value; next: main's next line, then over the second send
		text := string(out)
		for _, want := range []string{"Value returned is $1 = 42", "\n22\t", "\n23\t", "$2 = 43"} {
			if !strings.Contains(text, want) {
				t.Errorf("gdb output lacks %q:\n%s", want, text)
			}
		}
	})
}

// TestBenchProgram runs the interposer benchmark program with a small N so that it keeps
// building and its own checks (every recorded call counted) keep passing; `make bench` runs it
// at full size.
func TestBenchProgram(t *testing.T) {
	bin := buildC(t, "bench", readFile(t, "testdata/interposer/bench.c"), "-Itestdata/interposer", "-DN=20000",
		"-Wno-cast-function-type", "testdata/interposer/rn_amd64.S")
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "interposer, recording") {
		t.Fatalf("bench: %v\n%s", err, out)
	}
}

// TestBenchMethodsProgram runs the trampoline benchmark program with a small N so that it keeps
// building and its own check (every recorded call counted) keeps passing.
func TestBenchMethodsProgram(t *testing.T) {
	bin := buildC(t, "bench_methods", readFile(t, "testdata/interposer/bench_methods.c"), "-DN=20000", "trampoline_amd64.S")
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "trampoline, recording") {
		t.Fatalf("bench_methods: %v\n%s", err, out)
	}
}

// TestAssemblesForDarwin builds the interposers and their runtime for every Apple target
// (clang-19 for the assembly, zig's macOS headers for the C) and checks the objects are Mach-O
// for the right CPU: what runs on Linux here is the same source that ships.
func TestAssemblesForDarwin(t *testing.T) {
	testfiles.NeedTools(t, "clang-19", "ld64.lld-19", "llvm-nm-19", "llvm-objdump-19")
	zig := filepath.Join(testfiles.Root(t), ".tools", "zig", "zig")
	for _, c := range []struct{ target, zigTarget, asm, arch string }{
		{"arm64-apple-macos13", "aarch64-macos", "msgsend_arm64.S", "arm64"},
		{"arm64-apple-ios15", "", "msgsend_arm64.S", "arm64"},
		{"arm64-apple-ios15-simulator", "", "msgsend_arm64.S", "arm64"},
		{"x86_64-apple-macos13", "x86_64-macos", "msgsend_amd64.S", "x86_64"},
		{"x86_64-apple-ios15-simulator", "", "msgsend_amd64.S", "x86_64"},
	} {
		t.Run(c.target, func(t *testing.T) {
			dir := t.TempDir()
			objs := []string{filepath.Join(dir, "msgsend.o")}
			if out, err := exec.Command("clang-19", "-target", c.target, "-c", "-I.", "-o", objs[0], c.asm).CombinedOutput(); err != nil {
				t.Fatalf("clang-19: %v\n%s", err, out)
			}
			// the method trampolines' pool (one ADDEND relocation per trampoline on arm64)
			objs = append(objs, filepath.Join(dir, "trampoline.o"))
			tramp := strings.Replace(c.asm, "msgsend_", "trampoline_", 1)
			if out, err := exec.Command("clang-19", "-target", c.target, "-c", "-I.", "-o", objs[1], tramp).CombinedOutput(); err != nil {
				t.Fatalf("clang-19 %s: %v\n%s", tramp, err, out)
			}
			if c.zigTarget != "" {
				objs = append(objs, filepath.Join(dir, "rt.o"))
				if out, err := exec.Command(zig, "cc", "-target", c.zigTarget, "-c", "-I.", "-o", objs[len(objs)-1], "rt.c").CombinedOutput(); err != nil {
					t.Fatalf("zig cc: %v\n%s", err, out)
				}
			}
			if c.zigTarget != "" { // macOS: the same assembly as the iOS targets
				checkStubUnwindInfo(t, c.arch, objs[0])
			}
			for _, o := range objs {
				f, err := machobind.Open(o)
				if err != nil {
					t.Fatal(err)
				}
				img, err := f.Slices[0].Parse()
				f.Close()
				if err != nil {
					t.Fatalf("%s: %v", o, err)
				}
				if f.Slices[0].Arch != c.arch || img.Header.Type != 1 /* MH_OBJECT */ {
					t.Fatalf("%s: arch %s type %v, want a %s object", o, f.Slices[0].Arch, img.Header.Type, c.arch)
				}
			}
		})
	}
}

// checkStubUnwindInfo links the interposer object into a dylib with ld64.lld-19 (the linker
// `make cross` uses) and checks that __unwind_info sends both return stubs to their own DWARF
// FDEs (mode DWARF: 0x03 on arm64, 0x04 on x86_64, in bits 24-27 of the encoding). A stub
// without a symbol of its own at its FDE's start loses its FDE in the link.
func checkStubUnwindInfo(t *testing.T, arch, obj string) {
	t.Helper()
	dylib := obj + ".dylib"
	if out, err := exec.Command("ld64.lld-19", "-arch", arch, "-platform_version", "macos", "13.0", "13.0", "-dylib",
		"-undefined", "dynamic_lookup", "-o", dylib, obj).CombinedOutput(); err != nil {
		t.Fatalf("ld64.lld-19: %v\n%s", err, out)
	}
	nm, err := exec.Command("llvm-nm-19", dylib).Output()
	if err != nil {
		t.Fatalf("llvm-nm-19: %v", err)
	}
	info, err := exec.Command("llvm-objdump-19", "--unwind-info", dylib).Output()
	if err != nil {
		t.Fatalf("llvm-objdump-19 --unwind-info: %v", err)
	}
	mode := map[string]string{"arm64": "=0x03", "x86_64": "=0x04"}[arch]
	for _, stub := range []string{"_msgtrace_after", "_msgtrace_after_tail"} {
		addr := ""
		for _, l := range strings.Split(string(nm), "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[2] == stub {
				addr = strings.TrimLeft(f[0], "0")
			}
		}
		if addr == "" {
			t.Fatalf("%s: no symbol %s", dylib, stub)
		}
		found := false
		for _, l := range strings.Split(string(info), "\n") {
			if strings.Contains(l, "function offset=0x"+fmt.Sprintf("%08s", addr)+", encoding[") && strings.Contains(l, mode) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: __unwind_info has no DWARF entry for %s at 0x%s:\n%s", arch, stub, addr, info)
		}
	}
}

// TestBrokenCallee: a traced method that does not keep rbx / x19 (where the return stub finds
// its shadow entry) makes the stub fault at once, in itself, before anything is read or
// written through the register (testdata/interposer/broken.c: a writable buffer left there is
// untouched, a small address and one past every mapping trap too).
func TestBrokenCallee(t *testing.T) {
	forTargets(t, func(t *testing.T, tg target) {
		runC(t, tg, tg.buildC(t, "broken", readFile(t, "testdata/interposer/broken.c")))
	})
}
