//go:build linux

package msgtrace

import (
	"debug/elf"
	"runtime"
	"strings"
	"testing"

	"github.com/ebitengine/purego"
)

// TestCrashWhere: what the crash handler makes of code addresses in this process (the test
// binary, which holds the library's C and assembly and the Go runtime): Go's code is Go's,
// the C library's is not ours, the library's C, interposers and trampolines are, named by the
// symbol table.
func TestCrashWhere(t *testing.T) {
	markGoText()
	pc, _, _, _ := runtime.Caller(0)
	if w, f := crashWhere(pc); w != -2 {
		t.Errorf("Go code (this test): %d %q, want -2 (the Go runtime's)", w, f)
	}
	if w, f := crashWhere(runtime.FuncForPC(pc).Entry()); w != -2 {
		t.Errorf("Go code (runtime.Caller): %d %q", w, f)
	}
	getpid, err := purego.Dlsym(purego.RTLD_DEFAULT, "getpid")
	if err != nil {
		t.Fatal(err)
	}
	if w, f := crashWhere(getpid); w != -1 {
		t.Errorf("the C library's getpid: %d %q, want -1", w, f)
	}
	// `go test` links without the symbol table: C is then named by its offset in the object
	named := true
	if f, err := elf.Open("/proc/self/exe"); err == nil {
		if _, err := f.Symbols(); err != nil {
			named = false
		}
		f.Close()
	}
	p := crashProbes()
	for _, c := range []struct {
		name  string
		off   uintptr
		what  int
		frame string
	}{
		{"msgtrace_now_ticks", 4, 0, "msgtrace_now_ticks+0x4"},
		{"msgtrace_objc_msgSend", 8, 2, "msgtrace_objc_msgSend+0x8"},
		{"msgtrace_method_entry", 0, 6, "msgtrace_method_entry+0x0"},
		{"msgtrace_tramp_text", 3*32 + 4, 7, "msgtrace_tramp_text+0x64 (trampoline 3)"},
	} {
		w, f := crashWhere(p[c.name] + c.off)
		if !named && c.what == 0 && strings.HasPrefix(f, "libmsgtrace+0x") {
			continue
		}
		if w != c.what || f != c.frame {
			t.Errorf("%s+%d: %d %q, want %d %q", c.name, c.off, w, f, c.what, c.frame)
		}
	}
}
