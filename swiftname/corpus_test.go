package swiftname

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/blacktop/go-macho"
	"github.com/msgtrace/msgtrace/internal/testfiles"
)

// ttStrings returns the NUL-terminated strings of b that start with "_Tt" and hold only the
// bytes of a mangled name.
func ttStrings(b []byte) []string {
	var out []string
	for {
		i := bytes.Index(b, []byte("_Tt"))
		if i < 0 {
			return out
		}
		j := i + 3
		for j < len(b) && (b[j] == '_' || b[j] == '$' || b[j] >= '0' && b[j] <= '9' || b[j] >= 'a' && b[j] <= 'z' || b[j] >= 'A' && b[j] <= 'Z') {
			j++
		}
		if j < len(b) && b[j] == 0 && (i == 0 || b[i-1] == 0) {
			out = append(out, string(b[i:j]))
		}
		b = b[j:]
	}
}

// TestCorpusNames demangles every "_Tt" string of the corpus binaries (class names in
// __objc_classname, type names elsewhere) and checks the Objective-C classes and protocols that
// go-macho reads from the Swift binaries' class lists.
func TestCorpusNames(t *testing.T) {
	names := map[string]bool{}
	var swiftFiles []string
	for _, p := range testfiles.Corpus(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, n := range ttStrings(b) {
			names[n] = true
			found = true
		}
		if found {
			swiftFiles = append(swiftFiles, p)
		}
	}
	if len(names) == 0 {
		testfiles.Missing(t, "a Swift binary of the corpus (testdata/corpus: `make corpus`)")
	}
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	parsed := 0
	for _, n := range sorted {
		got, ok := Parse(n)
		switch {
		case n == "_Tt": // a prefix string the runtime keeps
		case !ok:
			t.Errorf("%s: not demangled", n)
		default:
			parsed++
			if got == n || got == "" {
				t.Errorf("%s: demangled to %q", n, got)
			}
		}
	}
	t.Logf("%d _Tt names demangled in %d files", parsed, len(swiftFiles))

	// the class lists: every Swift class Objective-C sees, by its runtime name
	want := map[string]string{
		"_TtC11ApertureCLI20ApertureNotification":                  "ApertureCLI.ApertureNotification",
		"_TtC8Aperture8Aperture":                                   "Aperture.Aperture",
		"_TtC14ArgumentParser15ArgumentDecoder":                    "ArgumentParser.ArgumentDecoder",
		"_TtCV21SourceKittenFramework9SyntaxMap16DocCommentFinder": "SourceKittenFramework.SyntaxMap.DocCommentFinder",
		"_TtCV21SwiftLintBuiltInRules24CyclomaticComplexityRuleP33_019B3977399EDFE27094DAAD91C83F6E17ComplexityVisitor": "SwiftLintBuiltInRules.CyclomaticComplexityRule.(ComplexityVisitor in _019B3977)",
	}
	classes := 0
	for _, p := range swiftFiles {
		for _, f := range machoSlices(t, p) {
			cs, err := f.GetObjCClasses()
			if err != nil {
				continue
			}
			for _, c := range cs {
				if !IsMangled(c.Name) {
					continue
				}
				classes++
				got := Demangle(c.Name)
				if got == c.Name {
					t.Errorf("%s: class %s not demangled", filepath.Base(p), c.Name)
				}
				if w, ok := want[c.Name]; ok {
					if got != w {
						t.Errorf("%s = %q, want %q", c.Name, got, w)
					}
					delete(want, c.Name)
				}
			}
		}
	}
	for n := range want {
		t.Errorf("class %s not found in the corpus's class lists", n)
	}
	t.Logf("%d Swift classes in the class lists", classes)
}

func machoSlices(t *testing.T, p string) []*macho.File {
	if ff, err := macho.OpenFat(p); err == nil {
		t.Cleanup(func() { ff.Close() })
		var out []*macho.File
		for _, a := range ff.Arches {
			out = append(out, a.File)
		}
		return out
	}
	f, err := macho.Open(p)
	if err != nil {
		return nil
	}
	t.Cleanup(func() { f.Close() })
	return []*macho.File{f}
}
