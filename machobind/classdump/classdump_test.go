package classdump

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/internal/testfiles"
)

// objdump is the llvm-objdump the cross-checks compare with (as machobind's tests).
const objdump = "llvm-objdump-19"

// objdumpClasses reads llvm-objdump's --objc-meta-data listing of __objc_classlist: for each
// class it can follow (a classic image; it does not follow chained pointers in the file), its
// methods as "-sel types" and "+sel types".
func objdumpClasses(t *testing.T, file, arch string) map[string][]string {
	out, err := exec.Command(objdump, "--macho", "--objc-meta-data", "--arch="+arch, file).Output()
	if err != nil {
		t.Fatalf("%s --objc-meta-data %s: %v", objdump, file, err)
	}
	classes := map[string][]string{}
	var cls string
	inList, meta, named := false, false, false
	lines := strings.Split(string(out), "\n")
	entry := regexp.MustCompile(`^[0-9a-f]{16} 0x`)
	for i, l := range lines {
		f := strings.Fields(l)
		switch {
		case strings.HasPrefix(l, "Contents of ("):
			inList = strings.HasSuffix(l, ",__objc_classlist) section")
			continue
		case !inList:
			continue
		case entry.MatchString(l):
			cls, meta, named = "", false, false
		case l == "Meta Class":
			meta, named = true, false
		case len(f) == 3 && f[0] == "name" && !named:
			named = true
			if !meta {
				cls = f[2]
				classes[cls] = []string{}
			}
		case len(f) >= 3 && f[0] == "name" && cls != "" && strings.HasPrefix(l, "\t\t") && !strings.HasPrefix(l, "\t\t\t") &&
			i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "types "):
			// a method of the class's list (2 tabs; a protocol's are deeper), "name ADDR SEL"
			// or, in a relative list, "name OFF (ADDR) SEL"
			sign := "-"
			if meta {
				sign = "+"
			}
			tf := strings.Fields(lines[i+1])
			classes[cls] = append(classes[cls], sign+f[len(f)-1]+" "+tf[len(tf)-1])
		}
	}
	return classes
}

// TestClassesObjdump compares the Objective-C classes and methods DumpClasses reads with what
// llvm-objdump --objc-meta-data prints of the same files (fixtures and corpus).
func TestClassesObjdump(t *testing.T) {
	if _, err := exec.LookPath(objdump); err != nil {
		t.Fatalf("%s not installed: run `make setup`", objdump)
	}
	compared, skipped := 0, 0
	for _, file := range testfiles.All(t) {
		if strings.HasSuffix(file, ".o") || strings.Contains(file, "dsym") {
			continue
		}
		d, err := DumpClasses(file, "")
		if err != nil {
			continue // not a file go-macho reads (Go's debug/macho test files)
		}
		for _, s := range d.Slices {
			if len(s.Classes) == 0 {
				continue
			}
			want := objdumpClasses(t, file, s.Arch)
			for _, c := range s.Classes {
				w, ok := want[c.Name]
				if !ok {
					continue // a class objdump does not follow (chained pointers)
				}
				if strings.Contains(strings.Join(w, "\n"), "(0x") {
					skipped++ // a relative method list objdump could not resolve names in
					continue
				}
				var got []string
				for _, m := range c.Methods {
					sign := "-"
					if m.Class {
						sign = "+"
					}
					got = append(got, sign+m.Selector+" "+m.Types)
				}
				sort.Strings(got)
				sort.Strings(w)
				if strings.Join(got, "\n") != strings.Join(w, "\n") {
					t.Errorf("%s [%s] %s: methods\n%s\nobjdump:\n%s", filepath.Base(file), s.Arch, c.Name, strings.Join(got, "\n"), strings.Join(w, "\n"))
				}
				compared++
			}
			for n := range want {
				found := false
				for _, c := range s.Classes {
					found = found || c.Name == n
				}
				if !found {
					t.Errorf("%s [%s]: objdump lists class %s, DumpClasses does not", filepath.Base(file), s.Arch, n)
				}
			}
		}
	}
	if compared == 0 {
		t.Fatal("no class compared with objdump")
	}
	t.Logf("%d classes compared with objdump (%d it could not name the methods of)", compared, skipped)
}

// TestClassesSwift: the corpus's Swift binaries: Swift classes in the class list by their
// runtime names with the demangled name, Swift types from __swift5_types with class vtables.
func TestClassesSwift(t *testing.T) {
	var file string
	for _, f := range testfiles.Corpus(t) {
		if strings.HasPrefix(filepath.Base(f), "aperture") {
			file = f
		}
	}
	if file == "" {
		testfiles.Missing(t, "the aperture binary of the corpus (testdata/corpus: `make corpus`)")
	}
	d, err := DumpClasses(file, "arm64")
	if err != nil {
		t.Fatal(err)
	}
	s := d.Slices[0]
	cls := map[string]ObjCClassDump{}
	for _, c := range s.Classes {
		cls[c.Name] = c
	}
	ap, ok := cls["_TtC8Aperture8Aperture"]
	if !ok || ap.Display != "Aperture.Aperture" || !ap.Swift || ap.Superclass != "NSObject" {
		t.Errorf("Aperture.Aperture: %+v", ap)
	}
	var sels []string
	for _, m := range ap.Methods {
		sels = append(sels, m.Name)
	}
	if !strings.Contains(strings.Join(sels, " "), "-[_TtC8Aperture8Aperture captureOutput:didStartRecordingToOutputFileAtURL:fromConnections:]") {
		t.Errorf("Aperture.Aperture's methods: %v", sels)
	}
	if c := cls["_TtC11ApertureCLI4Once"]; c.Display != "ApertureCLI.Once" || c.Superclass != "_TtCs12_SwiftObject" {
		t.Errorf("ApertureCLI.Once: %+v", c)
	}
	types := map[string]SwiftTypeDump{}
	for _, t := range s.SwiftTypes {
		types[t.Kind+" "+t.Name] = t
	}
	once, ok := types["class ApertureCLI.Once"]
	if !ok || once.VTable == nil || len(once.VTable.Methods) == 0 {
		t.Fatalf("class ApertureCLI.Once: %+v", once)
	}
	if _, ok := types["struct ApertureCLI.ApertureCLI.Events.ListenAll"]; !ok {
		t.Errorf("nested struct not named with its parents: %d types", len(types))
	}
	if s.Counts.SwiftClasses == 0 || s.Counts.SwiftObjC != 4 || s.Counts.VTableMethods == 0 {
		t.Errorf("counts %+v", s.Counts)
	}
}

// TestClassesLoad builds a dylib with +load in a class and in a category (clang-19 +
// ld64.lld-19, classic and chained) and finds both marked, in the non-lazy lists.
func TestClassesLoad(t *testing.T) {
	testfiles.NeedTools(t, "clang-19", "ld64.lld-19")
	root := testfiles.Root(t)
	sdk := filepath.Join(root, "sdk")
	if _, err := os.Stat(filepath.Join(sdk, "usr", "lib")); err != nil {
		t.Fatalf("no SDK stubs in %s: run `make setup`", sdk)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "load.m")
	code := `__attribute__((objc_root_class)) @interface Boot { Class isa; } + (void)load; - (int)run; @end
@implementation Boot + (void)load {} - (int)run { return 1; } @end
@interface Boot (Early) + (void)load; - (int)early; @end
@implementation Boot (Early) + (void)load {} - (int)early { return 2; } @end
__attribute__((objc_root_class)) @interface Lazy { Class isa; } - (int)later; @end
@implementation Lazy - (int)later { return 3; } @end
`
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, style := range []string{"-Wl,-fixup_chains", "-Wl,-no_fixup_chains"} {
		out := filepath.Join(dir, "libload"+style[5:]+".dylib")
		cmd := exec.Command("clang-19", "-target", "arm64-apple-macos13", "-fuse-ld=lld", "-nostdlib", style, "-O1", "-g0",
			"-Wno-objc-root-class", "-isysroot", sdk, "-L"+filepath.Join(sdk, "usr", "lib"), "-shared", "-o", out, src, "-lSystem", "-lobjc")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", cmd, err, b)
		}
		d, err := DumpClasses(out, "")
		if err != nil {
			t.Fatal(err)
		}
		s := d.Slices[0]
		var loads, names []string
		for _, c := range s.Classes {
			for _, m := range c.Methods {
				names = append(names, m.Name)
				if m.Load {
					loads = append(loads, m.Name)
				}
			}
			if c.NonLazy != (c.Name == "Boot") {
				t.Errorf("%s: class %s non-lazy %v", style, c.Name, c.NonLazy)
			}
		}
		if len(s.Categories) != 1 || s.Categories[0].Name != "Early" || s.Categories[0].Class != "Boot" || !s.Categories[0].NonLazy {
			t.Fatalf("%s: categories %+v", style, s.Categories)
		}
		for _, m := range s.Categories[0].Methods {
			names = append(names, m.Name)
			if m.Load {
				loads = append(loads, m.Name)
			}
		}
		sort.Strings(names)
		if strings.Join(loads, " ") != "+[Boot load] +[Boot load]" || strings.Join(names, " ") != "+[Boot load] +[Boot load] -[Boot early] -[Boot run] -[Lazy later]" {
			t.Errorf("%s: methods %v, +load %v", style, names, loads)
		}
		if s.Counts.Load != 2 {
			t.Errorf("%s: counts %+v", style, s.Counts)
		}
	}
}
