package asmoffsets

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// copyHeaders copies the repository's headers into a temporary directory, with edit applied
// to rt.h.
func copyHeaders(t *testing.T, edit func(string) string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"rt.h", "trampoline.h", "asm_offsets.h"} {
		b, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if name == "rt.h" {
			s = edit(s)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A field added to struct mt_thread moves every offset after it: the generator sees it, and a
// C build against the old header fails on its static assertions.
func TestStructChangeRegenerates(t *testing.T) {
	const field = "\tstruct mt_entry *limit;"
	dir := copyHeaders(t, func(s string) string {
		if !strings.Contains(s, field) {
			t.Fatalf("rt.h: no %q", field)
		}
		return strings.Replace(s, field, "\tuint64_t added;\n"+field, 1)
	})
	old, err := os.ReadFile(filepath.Join(dir, "asm_offsets.h"))
	if err != nil {
		t.Fatal(err)
	}
	hdr, _, err := Generate(dir, Targets()[:1])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(hdr, old) {
		t.Fatal("the generated header did not change")
	}
	for _, want := range []string{"#define T_TOP        0\n", "#define T_LIMIT      16\n", "#define T_STACK      96\n"} {
		if !bytes.Contains(hdr, []byte(want)) {
			t.Errorf("generated header lacks %q:\n%s", want, hdr)
		}
	}
	// the stale header against the changed struct: the build stops
	src := filepath.Join(dir, "use.c")
	if err := os.WriteFile(src, []byte("#include \"rt.h\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(Targets()[0].CC[0], "-c", "-I", dir, "-o", filepath.Join(dir, "use.o"), src).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "T_LIMIT") {
		t.Fatalf("a build with the stale header did not fail on T_LIMIT: %v\n%s", err, out)
	}
}

// A struct whose size the assembly shifts by must stay a power of two (struct mt_entry: the
// depth is an entry's distance from the base >> ENTRY_SHIFT).
func TestShiftNeedsPowerOfTwo(t *testing.T) {
	dir := copyHeaders(t, func(s string) string {
		return strings.Replace(s, "\tuint64_t ret;   /* caller's return address", "\tuint64_t added;\n\tuint64_t ret;   /*", 1)
	})
	_, _, err := Generate(dir, Targets()[:1])
	if err == nil || !strings.Contains(err.Error(), "ENTRY_SHIFT needs a power of two") {
		t.Fatalf("err = %v, want ENTRY_SHIFT needs a power of two", err)
	}
}

// A target whose layout differs (here ILP32: gcc -m32, compiled only to assembly) fails the
// generation, naming the first value that differs.
func TestTargetsMustAgree(t *testing.T) {
	host := Targets()[0]
	ilp32 := Target{Name: "ilp32", CC: append(append([]string{}, host.CC...), "-m32")}
	if out, err := exec.Command(ilp32.CC[0], append(ilp32.CC[1:], "-x", "c", "-S", "-o", "/dev/null", "-")...).CombinedOutput(); err != nil {
		t.Skipf("%v cannot compile for ILP32: %v %s", ilp32.CC, err, out)
	}
	_, _, err := Generate(filepath.Join("..", ".."), []Target{host, ilp32})
	if err == nil || !strings.Contains(err.Error(), "host and ilp32 disagree") {
		t.Fatalf("err = %v, want a disagreement", err)
	}
}
