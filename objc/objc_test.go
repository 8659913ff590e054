package objc

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// TestGNURuntime binds gcc's GNU libobjc, loaded into this process after the first question
// (a program may dlopen its runtime late): real classes compiled by gcc, listed and named,
// and the runtime's lock, recursive and held against other threads.
func TestGNURuntime(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libclasses.so")
	if out, err := exec.Command("gcc", "-x", "objective-c", "-shared", "-fPIC", "-o", lib, "testdata/classes.m", "-lobjc").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	if _, err := purego.Dlsym(purego.RTLD_DEFAULT, "class_getName"); err == nil {
		t.Fatal("an Objective-C runtime is loaded before the test loads one")
	}
	if k := Runtime(); k != None {
		t.Fatalf("no runtime loaded: Runtime() = %d, want None", k)
	}
	if c := Classes(); c != nil {
		t.Fatalf("no runtime loaded: %d classes", len(c))
	}
	if _, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
		t.Fatal(err)
	}
	if k := Runtime(); k != GNU {
		t.Fatalf("libobjc.so.4 loaded: Runtime() = %d, want GNU (%d)", k, GNU)
	}

	var lookUp func(string) uintptr
	var trylock, unlock func(uintptr) int
	purego.RegisterLibFunc(&lookUp, purego.RTLD_DEFAULT, "objc_lookUpClass")
	purego.RegisterLibFunc(&trylock, purego.RTLD_DEFAULT, "objc_mutex_trylock")
	purego.RegisterLibFunc(&unlock, purego.RTLD_DEFAULT, "objc_mutex_unlock")
	square, shape := lookUp("Square"), lookUp("Shape")
	if square == 0 || shape == 0 {
		t.Fatal("classes not registered")
	}
	classes := Classes()
	if !slices.Contains(classes, square) || !slices.Contains(classes, shape) {
		t.Errorf("Classes() (%d) lacks Square %#x or Shape %#x", len(classes), square, shape)
	}
	for _, c := range []struct {
		cls  uintptr
		want string
	}{{square, "Square"}, {shape, "Shape"}, {0, ""}} {
		if got := ClassName(c.cls); got != c.want {
			t.Errorf("ClassName(%#x) = %q, want %q", c.cls, got, c.want)
		}
	}
	if got := ImageClasses(lib); len(got) != 0 {
		t.Errorf("ImageClasses on gcc's runtime = %v, want none", got)
	}

	mutexVar, err := purego.Dlsym(purego.RTLD_DEFAULT, "__objc_runtime_mutex")
	if err != nil {
		t.Fatal(err)
	}
	mutex := **(**uintptr)(unsafe.Pointer(&mutexVar))
	// tryOther tries the runtime's lock from another thread: 0 taken (and given back), else held.
	tryOther := func() int {
		got := make(chan int)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			r := trylock(mutex)
			if r == 0 || r == 1 { // taken: its depth
				unlock(mutex)
				r = 0
			}
			got <- r
		}()
		return <-got
	}
	if r := tryOther(); r != 0 {
		t.Fatalf("the runtime's lock is held before WithLock (%d)", r)
	}
	ran := false
	WithLock(func() {
		WithLock(func() { ran = true }) // recursive: the same thread takes it again
		if r := tryOther(); r == 0 {
			t.Error("another thread took the runtime's lock inside WithLock")
		}
	})
	if !ran {
		t.Error("nested WithLock did not run")
	}
	if r := tryOther(); r != 0 {
		t.Errorf("the runtime's lock is still held after WithLock (%d)", r)
	}
}
