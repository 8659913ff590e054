//go:build linux

package msgtrace

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/msgtrace/msgtrace/machobind"
)

// TestRebindProcessELF rebinds a symbol across every object of this process found by
// dl_iterate_phdr: the dlopened library that imports it calls the replacement, our own image is
// skipped, Undo restores.
func TestRebindProcessELF(t *testing.T) {
	dir := t.TempDir()
	dep, user := filepath.Join(dir, "libdep.so"), filepath.Join(dir, "libuser.so")
	for _, c := range [][]string{
		{"-shared", "-fPIC", "-o", dep, "testdata/rebind/dep.c"},
		{"-shared", "-fPIC", "-o", user, "testdata/rebind/user.c", dep, "-Wl,-rpath," + dir},
	} {
		if out, err := exec.Command("gcc", c...).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
	}
	h, err := purego.Dlopen(user, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Fatal(err)
	}
	var callDep func(int32) int32
	purego.RegisterLibFunc(&callDep, h, "call_dep")
	fake, err := purego.Dlsym(h, "fake_dep_value")
	if err != nil {
		t.Fatal(err)
	}
	real, _ := purego.Dlsym(h, "dep_value")

	rt := ELFRuntime()
	imgs, _ := rt.Images()
	var names []string
	self := false
	for _, l := range imgs {
		names = append(names, filepath.Base(l.Name))
		self = self || l.Header == rt.Self()
	}
	if !strings.Contains(strings.Join(names, " "), "libuser.so") || !self {
		t.Fatalf("objects %v (ours among them: %v)", names, self)
	}
	r := machobind.NewRebinder(rt)
	hook, err := r.Rebind(machobind.Rebinding{Name: "dep_value", Replacement: fake})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("objects: %v; skipped: %v", names, hook.Skipped())
	if got := callDep(7); got != 7000 {
		t.Errorf("call_dep(7) = %d, want the replacement's 7000", got)
	}
	if hook.Slots() != 1 || hook.Original("dep_value") != real {
		t.Errorf("slots %d, original %#x (want 1, %#x); skipped %v", hook.Slots(), hook.Original("dep_value"), real, hook.Skipped())
	}
	if err := hook.Undo(); err != nil {
		t.Fatal(err)
	}
	if got := callDep(7); got != 8 {
		t.Errorf("after Undo call_dep(7) = %d", got)
	}
}
