package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gomacho "github.com/blacktop/go-macho"

	"github.com/msgtrace/msgtrace/internal/testfiles"
)

// TestFallbackMasks compiles rt.c for every Apple target the runtime distinguishes (the ones
// `make cross` builds, and Mac Catalyst, tvOS, visionOS, arm64e) with clang-19 and the SDK
// headers cross.sh uses, reads the fallback masks back from each object with go-macho, and
// compares them with objc4's table (wantMasks). `make cross` checks its artifacts the same way.
func TestFallbackMasks(t *testing.T) {
	testfiles.NeedTools(t, "clang-19")
	root := testfiles.Root(t)
	macinc := filepath.Join(root, ".tools/zig/lib/libc/include/any-macos-any")
	for _, c := range []struct {
		target   string
		platform uint32
	}{
		{"x86_64-apple-macos12", platformMacOS},
		{"x86_64-apple-ios14.0-macabi", platformMacCatalyst},
		{"x86_64-apple-ios14.0-simulator", platformIOSSimulator},
		{"x86_64-apple-tvos14.0-simulator", platformTVOSSimulator},
		{"arm64-apple-macos12", platformMacOS},
		{"arm64e-apple-macos12", platformMacOS},
		{"arm64-apple-ios14.0-macabi", platformMacCatalyst},
		{"arm64-apple-ios14.0-simulator", platformIOSSimulator},
		{"arm64-apple-ios14", platformIOS},
		{"arm64e-apple-ios14", platformIOS},
		{"arm64-apple-tvos14", platformTVOS},
		{"arm64-apple-xros1", platformVisionOS},
		{"arm64-apple-xros1-simulator", platformVisionOSSimulat},
	} {
		t.Run(c.target, func(t *testing.T) {
			obj := filepath.Join(t.TempDir(), "rt.o")
			cmd := exec.Command("clang-19", "-target", c.target, "-isysroot", filepath.Join(root, "sdk"), "-idirafter", macinc,
				"-O2", "-Wall", "-Werror", "-c", filepath.Join(root, "rt.c"), "-o", obj)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
			}
			f, err := gomacho.Open(obj)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			class, tag, found, err := readMasks(f)
			if err != nil || !found {
				t.Fatalf("reading the masks: found %v, %v", found, err)
			}
			arch := strings.SplitN(c.target, "-", 2)[0]
			w, ok := wantMasks(c.platform, arch)
			if !ok {
				t.Fatalf("no table entry for platform %d %s", c.platform, arch)
			}
			if want := w.tag | unalignedBits; class != w.class || tag != want {
				t.Errorf("class %#x tag %#x, want class %#x tag %#x (%s, and the unaligned bits)", class, tag, w.class, want, w.why)
			}
			if bv := f.BuildVersions(); len(bv) != 1 || uint32(bv[0].Platform) != c.platform {
				t.Errorf("object's LC_BUILD_VERSION is not platform %d", c.platform)
			}
		})
	}
}
