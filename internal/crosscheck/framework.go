package main

// The dynamic framework (msgtrace.framework): its bundles checked (checkFramework) and its
// xcframework (checkDynamicXCFramework), with trees copied and compared. The checks every
// dylib gets beyond its load commands are beside it: initializers (initializers.go),
// llvm-objdump's reading and the SDK stubs (objdump.go, sdkstubs.go); the app link test is in
// applink.go.

import (
	"bytes"
	"debug/macho"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

const (
	fwInstallName      = "@rpath/msgtrace.framework/msgtrace"            // iOS: shallow bundle
	fwInstallNameMacOS = "@rpath/msgtrace.framework/Versions/A/msgtrace" // macOS: versioned bundle
)

// frameworkArt is one framework bundle cross.sh builds; its binary is also in artifacts.
type frameworkArt struct {
	dir       string // relative to OUTDIR
	versioned bool   // macOS layout: Versions/A, Versions/Current and top-level symlinks
	platform  uint32
	archs     []string
	supported string // CFBundleSupportedPlatforms
	minKey    string // the Info.plist key holding the minimum OS
	rpath     string // the rpath an app embedding it in its bundle uses
	appDir    string // where the app's executable sits in its bundle, relative to the .app
	fwDir     string // where embedded frameworks sit in the bundle, relative to the .app
}

var frameworks = []frameworkArt{
	{"ios-arm64/msgtrace.framework", false, platformIOS, []string{"arm64"}, "iPhoneOS", "MinimumOSVersion", "@executable_path/Frameworks", ".", "Frameworks"},
	{"ios-simulator/msgtrace.framework", false, platformIOSSimulator, []string{"arm64", "x86_64"}, "iPhoneSimulator", "MinimumOSVersion", "@executable_path/Frameworks", ".", "Frameworks"},
	{"macos/msgtrace.framework", true, platformMacOS, []string{"arm64", "x86_64"}, "MacOSX", "LSMinimumSystemVersion", "@executable_path/../Frameworks", "Contents/MacOS", "Contents/Frameworks"},
}

// top is where the bundle's contents are: the bundle itself, or Versions/A.
func (fw frameworkArt) top() string {
	if fw.versioned {
		return filepath.Join(fw.dir, "Versions", "A")
	}
	return fw.dir
}

func (fw frameworkArt) binary() string { return filepath.Join(fw.top(), "msgtrace") }

func (fw frameworkArt) plist() string {
	if fw.versioned {
		return filepath.Join(fw.top(), "Resources", "Info.plist")
	}
	return filepath.Join(fw.top(), "Info.plist")
}

func (fw frameworkArt) installName() string {
	if fw.versioned {
		return fwInstallNameMacOS
	}
	return fwInstallName
}

// checkFramework checks a framework bundle around its binary (checked as a dylib): layout,
// Info.plist against the binary, headers and module map.
func checkFramework(outdir string, fw frameworkArt) {
	where := fw.dir
	dir := filepath.Join(outdir, fw.dir)
	if _, err := os.Stat(dir); err != nil {
		fail(where, "missing")
		return
	}
	if fw.versioned {
		if t, err := os.Readlink(filepath.Join(dir, "Versions", "Current")); err != nil || t != "A" {
			fail(where, "Versions/Current: %q %v, want a symlink to A", t, err)
		}
		for _, l := range []string{"msgtrace", "Headers", "Modules", "Resources"} {
			t, err := os.Readlink(filepath.Join(dir, l))
			if err != nil || t != "Versions/Current/"+l {
				fail(where, "%s: %q %v, want a symlink to Versions/Current/%s", l, t, err, l)
			}
			if _, err := os.Stat(filepath.Join(dir, l)); err != nil {
				fail(where, "%s does not resolve: %v", l, err)
			}
		}
	}
	h, err1 := os.ReadFile(filepath.Join(outdir, fw.top(), "Headers", "msgtrace.h"))
	want, err2 := os.ReadFile(filepath.Join(outdir, "msgtrace.h"))
	if err1 != nil || err2 != nil || !bytes.Equal(h, want) {
		fail(where, "Headers/msgtrace.h missing or not the public header")
	}
	mm, err := os.ReadFile(filepath.Join(outdir, fw.top(), "Modules", "module.modulemap"))
	if err != nil || !regexp.MustCompile(`framework\s+module\s+msgtrace\s*\{[^}]*umbrella\s+header\s+"msgtrace.h"`).Match(mm) {
		fail(where, "Modules/module.modulemap missing or not `framework module msgtrace` with umbrella header msgtrace.h")
	}
	src, err := os.ReadFile(filepath.Join(outdir, fw.plist()))
	if err != nil {
		fail(where, "Info.plist: %v", err)
		return
	}
	v, err := parsePlist(src)
	if err != nil {
		fail(where, "Info.plist: %v", err)
		return
	}
	pl, _ := v.(map[string]any)
	str := func(k string) string { s, _ := pl[k].(string); return s }
	wantKeys := map[string]string{
		"CFBundleExecutable": "msgtrace", "CFBundlePackageType": "FMWK", "CFBundleName": "msgtrace",
		"CFBundleInfoDictionaryVersion": "6.0",
	}
	for k, w := range wantKeys {
		if str(k) != w {
			fail(where, "Info.plist: %s is %q, want %q", k, str(k), w)
		}
	}
	for _, k := range []string{"CFBundleIdentifier", "CFBundleShortVersionString", "CFBundleVersion", fw.minKey} {
		if str(k) == "" {
			fail(where, "Info.plist: no %s", k)
		}
	}
	if p := plistStrings(pl["CFBundleSupportedPlatforms"]); !slices.Equal(p, []string{fw.supported}) {
		fail(where, "Info.plist: CFBundleSupportedPlatforms %v, want [%s]", p, fw.supported)
	}
	if _, err := os.Stat(filepath.Join(outdir, fw.top(), str("CFBundleExecutable"))); err != nil {
		fail(where, "Info.plist: CFBundleExecutable %q is not in the bundle", str("CFBundleExecutable"))
	}
	d, err := runDump(filepath.Join(outdir, fw.binary()))
	if err != nil {
		fail(where, "%v", err)
		return
	}
	for _, s := range d.Slices {
		if !sameVersion(s.MinOS, str(fw.minKey)) {
			fail(where, "Info.plist: %s %q, the %s slice's LC_BUILD_VERSION says %s", fw.minKey, str(fw.minKey), s.Arch, s.MinOS)
		}
	}
	fmt.Printf("ok  %-38s bundle: Info.plist (%s %s, %s), Headers, Modules\n", fw.dir, fw.minKey, str(fw.minKey), fw.supported)
}

// sameVersion compares versions as numbers: "14" and "14.0" are the same.
func sameVersion(a, b string) bool {
	norm := func(v string) string {
		for strings.HasSuffix(v, ".0") {
			v = strings.TrimSuffix(v, ".0")
		}
		return v
	}
	return a != "" && norm(a) == norm(b)
}

// copyTree copies a directory, symlinks as symlinks.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(t, to)
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, 0o644)
		}
	})
}

// sameTree reports how two directories differ (files by content, symlinks by target), or "".
func sameTree(a, b string) string {
	list := func(root string) (map[string]string, error) {
		m := map[string]string{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				t, err := os.Readlink(p)
				m[rel] = "-> " + t
				return err
			case d.IsDir():
				m[rel] = "dir"
			default:
				b, err := os.ReadFile(p)
				m[rel] = string(b)
				return err
			}
			return nil
		})
		return m, err
	}
	ma, err1 := list(a)
	mb, err2 := list(b)
	if err1 != nil || err2 != nil {
		return fmt.Sprint(err1, err2)
	}
	for k, v := range ma {
		if w, ok := mb[k]; !ok || v != w {
			return k
		}
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			return k
		}
	}
	return ""
}

// checkDynamicXCFramework checks msgtrace.xcframework: each library the Info.plist lists is one
// of the checked framework bundles, identical, and its platform, variant and architectures are
// what its binary says.
func checkDynamicXCFramework(outdir string) {
	const name = "msgtrace.xcframework"
	xc := filepath.Join(outdir, name)
	src, err := os.ReadFile(filepath.Join(xc, "Info.plist"))
	if err != nil {
		fail(name, "%v", err)
		return
	}
	v, err := parsePlist(src)
	if err != nil {
		fail(name+"/Info.plist", "%v", err)
		return
	}
	pl, _ := v.(map[string]any)
	if pl["CFBundlePackageType"] != "XFWK" || pl["XCFrameworkFormatVersion"] != "1.0" {
		fail(name+"/Info.plist", "CFBundlePackageType %v, XCFrameworkFormatVersion %v: want XFWK, 1.0", pl["CFBundlePackageType"], pl["XCFrameworkFormatVersion"])
	}
	libs, _ := pl["AvailableLibraries"].([]any)
	byID := map[string]string{ // library identifier -> the checked bundle
		"ios-arm64": "ios-arm64/msgtrace.framework", "ios-arm64_x86_64-simulator": "ios-simulator/msgtrace.framework",
		"macos-arm64_x86_64": "macos/msgtrace.framework",
	}
	seen := map[string]bool{}
	var ids []string
	for _, l := range libs {
		lib, _ := l.(map[string]any)
		str := func(k string) string { s, _ := lib[k].(string); return s }
		id := str("LibraryIdentifier")
		where := name + "/" + id
		bundle, ok := byID[id]
		if !ok || seen[id] {
			fail(where, "unexpected or repeated library identifier")
			continue
		}
		seen[id] = true
		ids = append(ids, id)
		if str("LibraryPath") != "msgtrace.framework" {
			fail(where, "LibraryPath %q, want msgtrace.framework", str("LibraryPath"))
		}
		if lib["HeadersPath"] != nil {
			fail(where, "HeadersPath given: a framework carries its headers")
		}
		if diff := sameTree(filepath.Join(xc, id, "msgtrace.framework"), filepath.Join(outdir, bundle)); diff != "" {
			fail(where, "not the same as the checked %s (%s)", bundle, diff)
		}
		bin := filepath.Join(xc, id, str("BinaryPath"))
		d, err := runDump(bin)
		if str("BinaryPath") == "" || err != nil {
			fail(where, "BinaryPath %q: %v", str("BinaryPath"), err)
			continue
		}
		var archs []string
		for _, s := range d.Slices {
			archs = append(archs, s.Arch)
			plat := strings.ToLower(s.Platform)
			wantPlat, wantVariant := "ios", ""
			switch plat {
			case "macos":
				wantPlat = "macos"
			case "iossimulator":
				wantVariant = "simulator"
			}
			if str("SupportedPlatform") != wantPlat || str("SupportedPlatformVariant") != wantVariant {
				fail(where, "SupportedPlatform %q variant %q, the %s slice is %s", str("SupportedPlatform"), str("SupportedPlatformVariant"), s.Arch, s.Platform)
			}
		}
		slices.Sort(archs)
		if sa := plistStrings(lib["SupportedArchitectures"]); !slices.Equal(slices.Sorted(slices.Values(sa)), archs) {
			fail(where, "SupportedArchitectures %v, the binary has %v", sa, archs)
		}
		if want := id; !strings.HasPrefix(want, str("SupportedPlatform")+"-"+strings.Join(archs, "_")) {
			fail(where, "identifier does not read platform-archs[-variant]")
		}
	}
	for id := range byID {
		if !seen[id] {
			fail(name, "no library %s", id)
		}
	}
	fmt.Printf("ok  %-38s %s: the checked framework bundles, platforms and architectures as their binaries say\n", name, strings.Join(ids, ", "))
}

// hasCodeSignature reports whether a slice has LC_CODE_SIGNATURE.
func hasCodeSignature(f *macho.File) bool {
	for _, l := range f.Loads {
		if raw := l.Raw(); len(raw) >= 8 && f.ByteOrder.Uint32(raw) == 0x1d {
			return true
		}
	}
	return false
}
