package objc

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ebitengine/purego"
)

// TestGNURuntime names real classes compiled by gcc against GNU's libobjc: instance and class
// methods, a super call, an object's class (object_getClass is a header inline there).
func TestGNURuntime(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libclasses.so")
	if out, err := exec.Command("gcc", "-x", "objective-c", "-shared", "-fPIC", "-o", lib, "testdata/classes.m", "-lobjc").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	rt, err := Open(DefaultPath())
	if err != nil {
		t.Fatal(err)
	}
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Fatal(err)
	}
	var makeSquare func() uintptr
	purego.RegisterLibFunc(&makeSquare, h, "make_square")

	square := rt.LookUpClass("Square")
	shape := rt.LookUpClass("Shape")
	if square == 0 || shape == 0 {
		t.Fatal("classes not registered")
	}
	sides := rt.Selector("sides")
	obj := makeSquare()
	if got := rt.ObjectClass(obj); got != square {
		t.Fatalf("ObjectClass = %#x, want Square %#x", got, square)
	}
	meta := rt.ObjectClass(square)
	for _, c := range []struct {
		cls   uintptr
		sel   string
		super bool
		want  string
	}{
		{square, "sides", false, "-[Square sides]"},
		{square, "sides", true, "-[Shape sides]"}, // [super sides] from Square ran Shape's
		{meta, "make", false, "+[Square make]"},
		{rt.ObjectClass(shape), "make", false, "+[Shape make]"},
	} {
		got, err := rt.MethodName(c.cls, rt.Selector(c.sel), c.super)
		if err != nil || got != c.want {
			t.Errorf("MethodName(%s, super=%v) = %q, %v; want %q", c.sel, c.super, got, err, c.want)
		}
	}
	if n, _ := rt.MethodName(square, sides, false); n != "-[Square sides]" {
		t.Errorf("cached name %q", n)
	}
	if _, err := rt.MethodName(0, sides, false); err == nil {
		t.Error("nil class named")
	}
	if _, err := Open("/nonexistent/libobjc.so"); err == nil {
		t.Error("opened a missing runtime")
	}
	// The runtime is in the global scope now (RTLD_GLOBAL): Loaded finds the same one.
	lrt, err := Loaded()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := lrt.MethodName(square, sides, true); err != nil || got != "-[Shape sides]" {
		t.Errorf("Loaded().MethodName = %q, %v", got, err)
	}
}
