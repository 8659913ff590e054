package main

import (
	"debug/macho"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/internal/testfiles"
)

func TestParsePlist(t *testing.T) {
	good := `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>AvailableLibraries</key>
	<array>
		<dict>
			<key>LibraryIdentifier</key>
			<string>ios-arm64</string>
			<key>SupportedArchitectures</key>
			<array><string>arm64</string></array>
		</dict>
	</array>
	<key>Flag</key>
	<true/>
	<key>CFBundlePackageType</key>
	<string>XFWK</string>
</dict>
</plist>
`
	v, err := parsePlist([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	libs := m["AvailableLibraries"].([]any)
	lib := libs[0].(map[string]any)
	if m["CFBundlePackageType"] != "XFWK" || m["Flag"] != true || lib["LibraryIdentifier"] != "ios-arm64" ||
		!slices.Equal(plistStrings(lib["SupportedArchitectures"]), []string{"arm64"}) {
		t.Errorf("parsed %#v", v)
	}
	for name, bad := range map[string]string{
		"binary":        "bplist00\x00\x01",
		"not a plist":   "<dict></dict>",
		"key no value":  "<plist><dict><key>a</key></dict></plist>",
		"duplicate key": "<plist><dict><key>a</key><string>1</string><key>a</key><string>2</string></dict></plist>",
		"value as key":  "<plist><dict><string>a</string><string>1</string></dict></plist>",
		"unknown":       "<plist><set/></plist>",
		"cut":           "<plist><dict><key>a</key><string>1</string>",
		"empty":         "<plist></plist>",
	} {
		if _, err := parsePlist([]byte(bad)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestStubs(t *testing.T) {
	*flagSDK, *flagLibSystem = "../../sdk", "../../sdk/usr/lib/libSystem.tbd"
	st, err := readSDKStubs()
	if err != nil {
		t.Fatal(err)
	}
	for lib, sym := range map[string]string{
		"/usr/lib/libobjc.A.dylib":   "_OBJC_CLASS_$_NSObject",
		"/usr/lib/libSystem.B.dylib": "_dladdr",
		"/System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation": "_CFBundleGetMainBundle",
		"/System/Library/Frameworks/CoreFoundation.framework/CoreFoundation":            "_CFBundleGetMainBundle",
	} {
		if !st[lib][sym] {
			t.Errorf("%s: %s not found", lib, sym)
		}
	}
	if st["/usr/lib/libobjc.A.dylib"]["_CFRelease"] {
		t.Error("libobjc exports _CFRelease")
	}
}

// TestInitializerOrder links two objects with a constructor each into dylibs in both orders,
// for a target with chained fixups (__init_offsets: iOS 14 device) and one with classic binds
// (__mod_init_func: the iOS 14 simulator), and reads the initializers back in link order.
func TestInitializerOrder(t *testing.T) {
	testfiles.NeedTools(t, "clang-19", "ld64.lld-19")
	sdk, _ := filepath.Abs("../../sdk")
	dir := t.TempDir()
	for _, n := range []string{"first", "second"} {
		src := "__attribute__((constructor)) static void " + n + "(void) {}\nint " + n + "_x;\n"
		if err := os.WriteFile(filepath.Join(dir, n+".c"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, target := range []string{"arm64-apple-ios14.0", "x86_64-apple-ios14.0-simulator"} {
		for _, order := range [][]string{{"first", "second"}, {"second", "first"}} {
			out := filepath.Join(dir, target+"-"+order[0]+".dylib")
			args := []string{"-target", target, "-fuse-ld=lld", "-dynamiclib", "-nostdlib", "-isysroot", sdk,
				"-L", filepath.Join(sdk, "usr/lib"), "-o", out}
			for _, n := range order {
				args = append(args, filepath.Join(dir, n+".c"))
			}
			if b, err := exec.Command("clang-19", append(args, "-lSystem")...).CombinedOutput(); err != nil {
				t.Fatalf("clang-19 %s: %v\n%s", strings.Join(args, " "), err, b)
			}
			f, err := macho.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			chained := false
			for _, l := range f.Loads {
				if raw := l.Raw(); f.ByteOrder.Uint32(raw) == 0x80000034 { // LC_DYLD_CHAINED_FIXUPS
					chained = true
				}
			}
			if chained != strings.HasSuffix(target, "ios14.0") {
				t.Errorf("%s: chained fixups %v: the test means to cover both kinds", target, chained)
			}
			got, err := initializers(f, chained)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"_" + order[0], "_" + order[1]}
			if !slices.Equal(got, want) {
				t.Errorf("%s, %v (chained fixups %v): initializers %v, want %v", target, order, chained, got, want)
			}
		}
	}
}
