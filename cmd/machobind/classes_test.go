package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/machobind/classdump"
)

// TestDumpClasses: dump --classes on the corpus's Swift CLI, in text and JSON, and its usage
// errors.
func TestDumpClasses(t *testing.T) {
	var file string
	for _, f := range testfiles.Corpus(t) {
		if strings.HasPrefix(filepath.Base(f), "aperture") {
			file = f
		}
	}
	if file == "" {
		testfiles.Missing(t, "the aperture binary of the corpus (testdata/corpus: `make corpus`)")
	}
	code, out, errs := runCLI("dump", "--classes", "--arch", "arm64", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"class _TtC8Aperture8Aperture (Aperture.Aperture)",
		"-[_TtC8Aperture8Aperture init]",
		"class ApertureCLI.Once",
		"objc classes: 4 (4 Swift)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text: no %q:\n%s", want, out)
		}
	}
	code, out, errs = runCLI("dump", file, "--classes", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var d classdump.ClassesDump
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if !d.Fat || len(d.Slices) != 2 {
		t.Fatalf("slices: %+v", d)
	}
	for _, s := range d.Slices {
		if s.Counts.SwiftObjC != 4 || s.Counts.SwiftClasses == 0 {
			t.Errorf("%s: counts %+v", s.Arch, s.Counts)
		}
	}
	if code, _, _ := runCLI("dump", "--classes", "--symbol", "objc_msgSend", file); code != 2 {
		t.Errorf("--classes with --symbol: exit %d, want 2", code)
	}
}
