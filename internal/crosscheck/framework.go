package main

// The dynamic framework (msgtrace.framework) and the checks every dylib gets beyond its load
// commands: its initializers in order, its export trie, its binds read by llvm-objdump against
// machobind dump's pointer slots, and every import resolved in the SDK stubs.

import (
	"bytes"
	"debug/macho"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/msgtrace/msgtrace/machobind"
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

// initializers lists a slice's initializers in the order dyld runs them (__mod_init_func
// pointers or __init_offsets offsets, section by section), each named by the symbol at its address.
func initializers(f *macho.File, chained bool) ([]string, error) {
	const sectionType = 0xff
	const modInitFuncPointers, initFuncOffsets = 0x9, 0x16
	names := map[uint64]string{}
	if f.Symtab != nil {
		for _, s := range f.Symtab.Syms {
			if s.Type&0xe0 == 0 && s.Type&0x0e == 0x0e && s.Value != 0 { // N_SECT, not a stab
				if _, ok := names[s.Value]; !ok {
					names[s.Value] = s.Name
				}
			}
		}
	}
	var base uint64
	for _, l := range f.Loads {
		if s, ok := l.(*macho.Segment); ok && s.Name == "__TEXT" {
			base = s.Addr
		}
	}
	name := func(addr uint64) string {
		if n, ok := names[addr]; ok {
			return n
		}
		return fmt.Sprintf("%#x", addr)
	}
	var out []string
	for _, s := range f.Sections {
		switch s.Flags & sectionType {
		case modInitFuncPointers:
			data, err := s.Data()
			if err != nil {
				return nil, fmt.Errorf("%s: %v", s.Name, err)
			}
			for i := 0; i+8 <= len(data); i += 8 {
				v := f.ByteOrder.Uint64(data[i:])
				if chained { // a rebase in the chain: the target's vmaddr (DYLD_CHAINED_PTR_64) or offset
					v &= 0xfffffffff
					if v < base {
						v += base
					}
				}
				out = append(out, name(v))
			}
		case initFuncOffsets:
			data, err := s.Data()
			if err != nil {
				return nil, fmt.Errorf("%s: %v", s.Name, err)
			}
			for i := 0; i+4 <= len(data); i += 4 {
				out = append(out, name(base+uint64(f.ByteOrder.Uint32(data[i:]))))
			}
		}
	}
	return out, nil
}

// goLibInit matches the initializer Go's linker gives a c-shared or c-archive build: it starts
// the Go runtime on a thread of its own (runtime/rt0_darwin_*.s, rt0_ios_arm64.s).
var goLibInit = regexp.MustCompile(`^__rt0_(arm64|amd64)_(darwin|ios)_lib$`)

// checkInitializers: Go's initializer first, ctor.c's msgtrace_ctor after it. The constructor
// calls into Go, which waits for the runtime that Go's initializer starts; in the other order
// it would wait for a runtime that nothing has started yet.
func checkInitializers(where string, f *macho.File, chained bool) string {
	inits, err := initializers(f, chained)
	if err != nil {
		fail(where, "initializers: %v", err)
		return "initializers UNREADABLE"
	}
	goAt, ctorAt := -1, -1
	for i, n := range inits {
		if goLibInit.MatchString(n) && goAt < 0 {
			goAt = i
		}
		if n == "_msgtrace_ctor" {
			ctorAt = i
		}
	}
	switch {
	case goAt < 0:
		fail(where, "no Go runtime initializer (__rt0_*_lib) among the initializers %v", inits)
	case ctorAt < 0:
		fail(where, "no _msgtrace_ctor among the initializers %v: nothing would install at load", inits)
	case goAt != 0 || ctorAt < goAt:
		fail(where, "initializers %v: Go's %s must run first and _msgtrace_ctor after it", inits, inits[goAt])
	}
	return "initializers " + strings.Join(inits, ", ")
}

// checkLoadAnchor: the library has a class with +load (__objc_nlclslist: anchor_darwin.m's),
// so that objc4 attaches the launch images' categories in the library's own load_images,
// before its initializer installs (README, launch).
func checkLoadAnchor(where string, f *macho.File) string {
	if f.Section("__objc_nlclslist") == nil {
		fail(where, "no __objc_nlclslist: the library's +load (anchor_darwin.m) is missing")
		return "+load class MISSING"
	}
	return "+load class (__objc_nlclslist)"
}

// stubs: the exported symbols of every library the SDK stubs describe, by install name (a
// .tbd file's documents together: an umbrella and the libraries it re-exports). A framework's
// symbols are also listed under its shallow iOS path.
type stubs map[string]map[string]bool

var tbdList = regexp.MustCompile(`(?s)\b(symbols|weak-symbols|thread-local-symbols|objc-classes|objc-eh-types|objc-ivars):\s*\[([^\]]*)\]`)
var tbdInstall = regexp.MustCompile(`(?m)^install-name:\s*'?([^'\n]+)'?\s*$`)

func loadStubs(files ...string) (stubs, error) {
	st := stubs{}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		m := tbdInstall.FindSubmatch(src)
		if m == nil {
			return nil, fmt.Errorf("%s: no install-name", file)
		}
		name := strings.TrimSpace(string(m[1]))
		syms := map[string]bool{}
		for _, l := range tbdList.FindAllSubmatch(src, -1) {
			for _, s := range strings.Split(string(l[2]), ",") {
				s = strings.Trim(strings.TrimSpace(s), `'"`)
				if s == "" {
					continue
				}
				switch string(l[1]) {
				case "objc-classes":
					syms["_OBJC_CLASS_$_"+s], syms["_OBJC_METACLASS_$_"+s] = true, true
				case "objc-eh-types":
					syms["_OBJC_EHTYPE_$_"+s] = true
				case "objc-ivars":
					syms["_OBJC_IVAR_$_"+s] = true
				default:
					syms[s] = true
				}
			}
		}
		st[name] = syms
		if i := strings.Index(name, ".framework/Versions/"); i >= 0 {
			st[name[:i]+".framework/"+filepath.Base(name)] = syms
		}
	}
	return st, nil
}

var (
	stubsOnce sync.Once
	stubsRead stubs
	stubsErr  error
)

// sdkStubs loads zig's libSystem.tbd and every .tbd under the SDK directory (once).
func sdkStubs() (stubs, error) {
	stubsOnce.Do(func() { stubsRead, stubsErr = readSDKStubs() })
	return stubsRead, stubsErr
}

func readSDKStubs() (stubs, error) {
	files := []string{*flagLibSystem}
	err := filepath.WalkDir(*flagSDK, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".tbd") && filepath.Base(p) != "libSystem.tbd" {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return loadStubs(files...)
}

// bind is one symbol bind llvm-objdump lists.
type bind struct {
	section, dylib, symbol string
	addr                   uint64
}

// objdumpBinds runs llvm-objdump on one slice: --dyld-info for chained fixups, else the bind
// and lazy-bind tables (weak binds name no library and are left out).
func objdumpBinds(path, arch string, chained bool) ([]bind, error) {
	args := []string{"--macho", "--arch=" + arch}
	if chained {
		args = append(args, "--dyld-info")
	} else {
		args = append(args, "--bind", "--lazy-bind", "--weak-bind")
	}
	out, err := exec.Command(*flagObjdump, append(args, path)...).Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v", *flagObjdump, strings.Join(args, " "), err)
	}
	var binds []bind
	table := ""
	for _, line := range strings.Split(string(out), "\n") {
		switch strings.TrimSpace(line) {
		case "Bind table:", "Lazy bind table:", "Weak bind table:", "dyld information:":
			table = strings.TrimSpace(line)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasPrefix(f[2], "0x") {
			continue
		}
		addr, err := strconv.ParseUint(f[2][2:], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("llvm-objdump: bad address in %q", line)
		}
		b := bind{section: f[0] + "," + f[1], addr: addr}
		switch table {
		case "dyld information:": // segment section address pointer type addend dylib symbol
			if len(f) < 8 || f[4] != "bind" {
				continue
			}
			b.dylib, b.symbol = f[6], f[7]
		case "Bind table:": // segment section address type addend dylib symbol
			if len(f) < 7 {
				continue
			}
			b.dylib, b.symbol = f[5], f[6]
		case "Lazy bind table:": // segment section address dylib symbol
			b.dylib, b.symbol = f[3], f[4]
		default:
			continue
		}
		binds = append(binds, b)
	}
	return binds, nil
}

// objdumpExports lists the names in a slice's export trie.
func objdumpExports(path, arch string) (map[string]bool, error) {
	out, err := exec.Command(*flagObjdump, "--macho", "--arch="+arch, "--exports-trie", path).Output()
	if err != nil {
		return nil, fmt.Errorf("%s --exports-trie: %v", *flagObjdump, err)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(f[0], "0x") {
			names[f[1]] = true
		}
	}
	return names, nil
}

// shortName is llvm-objdump's name for a library: its file name up to the first dot.
func shortName(p string) string {
	b := filepath.Base(p)
	if i := strings.IndexByte(b, '.'); i > 0 {
		b = b[:i]
	}
	return b
}

func isPointerSection(sect string) bool {
	for _, s := range []string{",__got", ",__auth_got", ",__la_symbol_ptr", ",__nl_symbol_ptr"} {
		if strings.HasSuffix(sect, s) {
			return true
		}
	}
	return false
}

// crossCheckObjdump reads a dylib slice with llvm-objdump and holds it against machobind dump:
// the msgtrace_* functions in the export trie; every pointer slot machobind lists bound by
// llvm-objdump at the same address to the same symbol and library, and every bind llvm-objdump
// lists in a pointer section listed by machobind; every bind's symbol exported by the SDK stub
// of its library.
func crossCheckObjdump(where, path string, s machobind.SliceDump, exports []string) string {
	trie, err := objdumpExports(path, s.Arch)
	if err != nil {
		fail(where, "%v", err)
		return "objdump FAILED"
	}
	for _, e := range exports {
		if !trie["_"+e] {
			fail(where, "llvm-objdump: _%s is not in the export trie", e)
		}
	}
	chained := s.Fixups == "chained"
	binds, err := objdumpBinds(path, s.Arch, chained)
	if err != nil {
		fail(where, "%v", err)
		return "objdump FAILED"
	}
	byAddr := map[uint64]bind{}
	for _, b := range binds {
		byAddr[b.addr] = b
	}
	slots := map[uint64]bool{}
	for _, p := range s.Pointers {
		if p.Symbol == "" {
			continue
		}
		a, err := strconv.ParseUint(strings.TrimPrefix(p.Address, "0x"), 16, 64)
		if err != nil {
			fail(where, "machobind dump: slot address %q", p.Address)
			continue
		}
		slots[a] = true
		b, ok := byAddr[a]
		switch {
		case !ok:
			fail(where, "machobind lists %s at %s (%s), llvm-objdump binds nothing there", p.Symbol, p.Address, p.Section)
		case b.symbol != p.Symbol:
			fail(where, "%s: machobind says %s, llvm-objdump %s", p.Address, p.Symbol, b.symbol)
		case p.Ordinal > 0 && shortName(p.Library) != b.dylib:
			fail(where, "%s %s: machobind says %s, llvm-objdump %s", p.Address, p.Symbol, p.Library, b.dylib)
		}
	}
	libs := map[string]string{}
	for _, d := range s.Dylibs {
		libs[shortName(d.Path)] = d.Path
	}
	st, err := sdkStubs()
	if err != nil {
		fail(where, "reading the SDK stubs: %v", err)
		return "stubs UNREADABLE"
	}
	var unresolved []string
	inSlots := 0
	for _, b := range binds {
		if isPointerSection(b.section) {
			inSlots++
			if !slots[b.addr] {
				fail(where, "llvm-objdump binds %s at %#x (%s), machobind dump lists no slot there", b.symbol, b.addr, b.section)
			}
		}
		lib, ok := libs[b.dylib]
		if !ok {
			fail(where, "%s is bound to %q, not one of the dylibs it loads", b.symbol, b.dylib)
			continue
		}
		if !st[lib][b.symbol] {
			unresolved = append(unresolved, b.symbol+" ("+b.dylib+")")
		}
	}
	if len(unresolved) > 0 {
		slices.Sort(unresolved)
		fail(where, "imports not in the SDK stubs (dyld would fail to bind them): %s", strings.Join(slices.Compact(unresolved), ", "))
	}
	fixups := "classic binds"
	if chained {
		fixups = "chained fixups"
	}
	return fmt.Sprintf("llvm-objdump: %d msgtrace_* in the export trie; %d binds (%s), all in the SDK stubs, %d of them in pointer sections = machobind's %d slots",
		len(exports), len(binds), fixups, inSlots, len(slots))
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

// appSource is the app the link test builds: a class whose +load sends a message, as an app's
// launch code does, and a main that calls the framework's C API.
const appSource = `#include <msgtrace/msgtrace.h>

__attribute__((objc_root_class))
@interface Early {
	Class isa;
}
+ (void)load;
+ (int)warm;
@end

static int warmed;

@implementation Early
+ (void)load { [self warm]; }
+ (int)warm { return ++warmed; }
@end

int main(void) {
	struct msgtrace_counters c;
	msgtrace_get_counters(&c);
	return [Early warm] == 2 ? 0 : 1;
}
`

// appLinkTest links a small app for each of the framework's architectures, the framework first
// on the link line, then checks with machobind dump what dyld will do with it: the framework is
// the app's first LC_LOAD_DYLIB (dyld initializes an image's dependencies in that order, all of
// them before the image's own +load methods), it resolves through the app's LC_RPATH once
// embedded in the app's bundle, the app has a class with +load (__objc_nlclslist) and imports
// objc_msgSend from libobjc (the slot the framework rebinds before that +load runs). The same
// link with libobjc first shows the check can fail.
func appLinkTest(outdir string, fw frameworkArt, tmp string) {
	dir := filepath.Join(tmp, "app-"+strings.NewReplacer("/", "_", ".", "_").Replace(fw.dir))
	if err := os.MkdirAll(filepath.Join(dir, "lib"), 0o755); err != nil {
		fail(fw.dir, "%v", err)
		return
	}
	src := filepath.Join(dir, "app.m")
	if err := os.WriteFile(src, []byte(appSource), 0o644); err != nil {
		fail(fw.dir, "%v", err)
		return
	}
	libdir := filepath.Join(dir, "lib")
	if err := retargetLibSystem(filepath.Join(libdir, "libSystem.tbd")); err != nil {
		fail(fw.dir, "%v", err)
		return
	}
	fwParent := filepath.Join(outdir, filepath.Dir(fw.dir))
	for _, arch := range fw.archs {
		where := fw.dir + " [" + arch + "] app"
		target := arch + "-apple-"
		switch fw.platform {
		case platformMacOS:
			target += "macos" + *flagMacOSMin
		case platformIOS:
			target += "ios" + *flagIOSMin
		case platformIOSSimulator:
			target += "ios" + *flagIOSMin + "-simulator"
		}
		link := func(exe string, libsFirst bool) (*machobind.SliceDump, error) {
			libs := []string{"-framework", "msgtrace", "-lobjc", "-lSystem"}
			if libsFirst {
				libs = []string{"-lobjc", "-lSystem", "-framework", "msgtrace"}
			}
			args := append([]string{"-target", target, "-fuse-ld=lld", "-nostdlib", "-Wall", "-Werror", "-isysroot", *flagSDK,
				"-F", fwParent, "-L", libdir, "-L", filepath.Join(*flagSDK, "usr/lib"),
				"-Wl,-rpath," + fw.rpath, "-o", exe}, libs...)
			args = append(args, src)
			if out, err := exec.Command(*flagClang, args...).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("%s %s: %v\n%s", *flagClang, strings.Join(args, " "), err, out)
			}
			d, err := runDump(exe)
			if err != nil {
				return nil, err
			}
			if len(d.Slices) != 1 {
				return nil, fmt.Errorf("%d slices", len(d.Slices))
			}
			return &d.Slices[0], nil
		}
		bundle := filepath.Join(dir, arch, "App.app")
		exe := filepath.Join(bundle, fw.appDir, "App")
		if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
			fail(where, "%v", err)
			continue
		}
		s, err := link(exe, false)
		if err != nil {
			fail(where, "link: %v", err)
			continue
		}
		if s.Filetype != "execute" || s.Arch != arch || !strings.EqualFold(s.Platform, platformNames[fw.platform]) {
			fail(where, "not a %s %s executable: %s %s %s", arch, platformNames[fw.platform], s.Filetype, s.Arch, s.Platform)
		}
		var order []string
		for _, l := range s.Dylibs {
			order = append(order, l.Path)
		}
		if len(order) == 0 || order[0] != fw.installName() {
			fail(where, "LC_LOAD_DYLIB order %v: the framework is not first", order)
		}
		// embedded as Xcode's Embed & Sign does: the bundle's Frameworks directory
		if err := copyTree(filepath.Join(outdir, fw.dir), filepath.Join(bundle, fw.fwDir, "msgtrace.framework")); err != nil {
			fail(where, "embedding: %v", err)
			continue
		}
		resolved := ""
		if f, err := macho.Open(exe); err != nil {
			fail(where, "%v", err)
		} else {
			for _, l := range f.Loads {
				if r, ok := l.(*macho.Rpath); ok && strings.HasPrefix(r.Path, "@executable_path/") {
					p := filepath.Join(filepath.Dir(exe), strings.TrimPrefix(r.Path, "@executable_path/"),
						strings.TrimPrefix(fw.installName(), "@rpath/"))
					if _, err := os.Stat(p); err == nil && resolved == "" {
						resolved = p
					}
				}
			}
			hasLoad := f.Section("__objc_nlclslist") != nil
			f.Close()
			if !hasLoad {
				fail(where, "no __objc_nlclslist: the app's class with +load is not there")
			}
		}
		if resolved == "" {
			fail(where, "%s does not resolve through the app's LC_RPATH to the embedded framework", fw.installName())
		} else if a, b := fileBytes(resolved), fileBytes(filepath.Join(outdir, fw.binary())); a == nil || !bytes.Equal(a, b) {
			fail(where, "%s resolves to %s, which is not the framework's binary", fw.installName(), resolved)
		}
		send := false
		for _, p := range s.Pointers {
			if p.Symbol == "_objc_msgSend" && p.Library == "/usr/lib/libobjc.A.dylib" {
				send = true
			}
		}
		if !send {
			fail(where, "no _objc_msgSend slot bound to libobjc in the app")
		}
		// the control: libraries before the framework on the link line put it later
		if s2, err := link(filepath.Join(dir, arch, "App-libs-first"), true); err != nil {
			fail(where, "link (libraries first): %v", err)
		} else if len(s2.Dylibs) == 0 || s2.Dylibs[0].Path == fw.installName() {
			fail(where, "linked with libobjc first, the framework is still the first LC_LOAD_DYLIB: the order check proves nothing")
		}
		fmt.Printf("ok  %-38s %-7s app linked with -framework msgtrace first: LC_LOAD_DYLIB %s; embedded, %s -> %s; +load class, objc_msgSend slot\n",
			fw.dir, arch, strings.Join(order, ", "), fw.installName(), strings.TrimPrefix(resolved, dir+"/"))
	}
}

func fileBytes(p string) []byte {
	b, _ := os.ReadFile(p)
	return b
}

// retargetLibSystem writes zig's complete macOS libSystem.tbd with the iOS and simulator targets
// added (the SDK's own stub lists too few symbols for Go's runtime).
func retargetLibSystem(dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	src, err := os.ReadFile(*flagLibSystem)
	if err != nil {
		return err
	}
	src = regexp.MustCompile(`\barm64-macos\b`).ReplaceAll(src, []byte("arm64-macos, arm64-ios, arm64-ios-simulator"))
	src = regexp.MustCompile(`\bx86_64-macos\b`).ReplaceAll(src, []byte("x86_64-macos, x86_64-ios-simulator"))
	return os.WriteFile(dst, src, 0o644)
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
