// Command crosscheck checks the Apple libraries scripts/cross.sh builds. Every artifact is read
// back with `machobind dump --json` (archives member by member: dump reads Mach-O files, not
// static archives, so members are extracted with llvm-ar first) and with debug/macho, and checked
// for: its architectures; its platform (LC_BUILD_VERSION: macOS 1, iOS 2, iOS simulator 7); its
// file type; the msgtrace_* functions the public header declares, exported; the dylibs' install
// name, dependencies and (arm64) ad-hoc code signature; evidence that runtime/cgo was compiled
// for iOS (TARGET_OS_IPHONE); and the library's own imports of objc_msgSend: a dylib's are
// reported (the rebinder skips its own image), an archive must have none (linked into a host
// they would be the host's, which is rebound); the interposers' fallback masks (rt.c's
// msgtrace_isa_mask and msgtrace_tag_mask, read from the data section) against objc4's values
// for the target (masks.go). Each iOS archive is also linked into a small
// program for its target with clang-19 and ld64.lld-19, which must leave nothing undefined.
//
// Every dylib (libmsgtrace.dylib and the msgtrace.framework binaries) is also checked for its
// initializers in order (Go's runtime start, then ctor.c's msgtrace_ctor) and read a second way
// with llvm-objdump: the msgtrace_* functions in its export trie, its binds against machobind
// dump's pointer slots, and every import in the SDK stubs (framework.go). The frameworks'
// bundles (Info.plist against the binary, Headers, Modules, the macOS symlinks) and
// msgtrace.xcframework are checked, and a small app with a +load class is linked against each
// framework, which must be its first LC_LOAD_DYLIB and resolve through its rpath once embedded.
//
// usage: go run ./internal/crosscheck [flags] OUTDIR   (scripts/cross-check.sh passes the tools)
//
// Any mismatch prints "crosscheck: ARTIFACT: ..." and the exit status is 1.
package main

import (
	"bytes"
	"crypto/sha256"
	"debug/macho"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/msgtrace/msgtrace/machobind"
)

// artifact is one file cross.sh promises.
type artifact struct {
	path     string
	archive  bool     // static archive of MH_OBJECT members, else a dylib
	archs    []string // machobind's names, sorted
	platform uint32   // LC_BUILD_VERSION platform
	install  string   // a dylib's LC_ID_DYLIB ("" for installName)
}

const (
	platformMacOS        = 1
	platformIOS          = 2
	platformIOSSimulator = 7
	installName          = "@rpath/libmsgtrace.dylib"
)

var artifacts = []artifact{
	{"macos-arm64/libmsgtrace.dylib", false, []string{"arm64"}, platformMacOS, ""},
	{"macos-x86_64/libmsgtrace.dylib", false, []string{"x86_64"}, platformMacOS, ""},
	{"macos/libmsgtrace.dylib", false, []string{"arm64", "x86_64"}, platformMacOS, ""},
	{"ios-arm64/libmsgtrace.a", true, []string{"arm64"}, platformIOS, ""},
	{"ios-simulator-arm64/libmsgtrace.a", true, []string{"arm64"}, platformIOSSimulator, ""},
	{"ios-simulator-x86_64/libmsgtrace.a", true, []string{"x86_64"}, platformIOSSimulator, ""},
	{"ios-simulator/libmsgtrace.a", true, []string{"arm64", "x86_64"}, platformIOSSimulator, ""},
	{"ios-arm64/msgtrace.framework/msgtrace", false, []string{"arm64"}, platformIOS, fwInstallName},
	{"ios-simulator/msgtrace.framework/msgtrace", false, []string{"arm64", "x86_64"}, platformIOSSimulator, fwInstallName},
	{"macos/msgtrace.framework/Versions/A/msgtrace", false, []string{"arm64", "x86_64"}, platformMacOS, fwInstallNameMacOS},
}

// platformNames: machobind's spelling of a platform (go-macho's), compared case-insensitively.
var platformNames = map[uint32]string{platformMacOS: "macos", platformIOS: "ios", platformIOSSimulator: "iossimulator"}

// allowedDylib: what the dylibs may load (a missing one makes dyld refuse the library).
// CoreFoundation is a versioned bundle on macOS, a shallow one on iOS and in the simulator.
func allowedDylib(platform uint32, path string) bool {
	switch path {
	case "/usr/lib/libSystem.B.dylib", "/usr/lib/libresolv.9.dylib", "/usr/lib/libobjc.A.dylib":
		return true
	case "/System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation":
		return platform == platformMacOS
	case "/System/Library/Frameworks/CoreFoundation.framework/CoreFoundation":
		return platform != platformMacOS
	}
	return false
}

var (
	flagMachobind = flag.String("machobind", "bin/machobind", "machobind binary")
	flagAr        = flag.String("ar", "llvm-ar-19", "llvm-ar")
	flagLipo      = flag.String("lipo", "llvm-lipo-19", "llvm-lipo")
	flagClang     = flag.String("clang", "clang-19", "clang for the link test")
	flagSDK       = flag.String("sdk", "sdk", "the SDK stubs (sdk/)")
	flagLibSystem = flag.String("libsystem", ".tools/zig/lib/libc/darwin/libSystem.tbd", "a complete macOS libSystem.tbd (zig's), retargeted for the iOS link test")
	flagSymbols   = flag.String("symbols", "", "comma list of functions that must be exported (default: every msgtrace_*( declared in OUTDIR/msgtrace.h)")
	flagNoLink    = flag.Bool("nolink", false, "skip the iOS link test and the framework's app link test")
	flagObjdump   = flag.String("objdump", "llvm-objdump-19", "llvm-objdump, to read every dylib a second way")
	flagIOSMin    = flag.String("ios-min", "14.0", "the minimum iOS version every iOS and simulator file must carry (cross.sh's MSGTRACE_IOS_MIN)")
	flagMacOSMin  = flag.String("macos-min", "12.0", "the minimum macOS version every macOS file must carry (cross.sh's MSGTRACE_MACOS_MIN)")
)

var failures int

// wantMinOS is the minimum OS version cross.sh was asked for on a platform.
func wantMinOS(platform uint32) string {
	if platform == platformMacOS {
		return *flagMacOSMin
	}
	return *flagIOSMin
}

func fail(art, format string, args ...any) {
	failures++
	fmt.Fprintf(os.Stderr, "crosscheck: %s: %s\n", art, fmt.Sprintf(format, args...))
}

// runDump runs `machobind dump --json` on a file and decodes it into machobind's own schema.
func runDump(file string) (*machobind.Dump, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(*flagMachobind, "dump", "--json", file)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("machobind dump: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var d machobind.Dump
	if err := json.Unmarshal(out, &d); err != nil {
		return nil, fmt.Errorf("machobind dump --json: %v", err)
	}
	return &d, nil
}

// symbols of one Mach-O slice: exported (external, defined, not private extern), defined
// external (private extern too: those still link across the objects of one image) and undefined.
type symbols struct {
	exported, defined, undefined map[string]bool
}

func readSymbols(f *macho.File) symbols {
	s := symbols{map[string]bool{}, map[string]bool{}, map[string]bool{}}
	if f.Symtab == nil {
		return s
	}
	for _, sym := range f.Symtab.Syms {
		const nStab, nPext, nType, nExt, nUndf = 0xe0, 0x10, 0x0e, 0x01, 0x0
		switch {
		case sym.Type&nStab != 0 || sym.Type&nExt == 0:
		case sym.Type&nType == nUndf && sym.Value == 0:
			s.undefined[sym.Name] = true
		default:
			s.defined[sym.Name] = true
			if sym.Type&nPext == 0 {
				s.exported[sym.Name] = true
			}
		}
	}
	return s
}

// checkCodeSignature verifies the ad-hoc signature the linker (and Go's linker after it) put in
// an arm64 slice: every page hash of the CodeDirectory matches the file.
func checkCodeSignature(path string, f *macho.File) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	// the slice's bytes: find it by its header's position (thin: 0; universal: its fat offset)
	base := int64(0)
	if ff, err := macho.OpenFat(path); err == nil {
		for _, a := range ff.Arches {
			if a.Cpu == f.Cpu {
				base = int64(a.Offset)
			}
		}
		ff.Close()
	}
	var off, size uint32
	for _, l := range f.Loads {
		raw := l.Raw()
		if len(raw) >= 16 && f.ByteOrder.Uint32(raw) == 0x1d { // LC_CODE_SIGNATURE
			off, size = f.ByteOrder.Uint32(raw[8:]), f.ByteOrder.Uint32(raw[12:])
		}
	}
	if size == 0 {
		return errors.New("no LC_CODE_SIGNATURE")
	}
	if base+int64(off)+int64(size) > int64(len(data)) {
		return errors.New("signature past the end of the file")
	}
	sig := data[base+int64(off) : base+int64(off)+int64(size)]
	be := binary.BigEndian
	if len(sig) < 12 || be.Uint32(sig) != 0xfade0cc0 {
		return errors.New("no embedded signature superblob")
	}
	for i := uint32(0); i < be.Uint32(sig[8:]) && 12+8*int(i)+8 <= len(sig); i++ {
		bo := be.Uint32(sig[12+8*i+4:])
		if int(bo)+44 > len(sig) || be.Uint32(sig[bo:]) != 0xfade0c02 { // CodeDirectory
			continue
		}
		cd := sig[bo:]
		hashOff, nCode, codeLimit := be.Uint32(cd[16:]), be.Uint32(cd[28:]), be.Uint32(cd[32:])
		hashSize, hashType, pageShift := int(cd[36]), cd[37], cd[39]
		if hashType != 2 || hashSize != sha256.Size { // SHA-256
			return fmt.Errorf("hash type %d, size %d: want SHA-256", hashType, hashSize)
		}
		page := int64(1) << pageShift
		if int64(codeLimit) != int64(off) {
			return fmt.Errorf("code limit %#x, the signature starts at %#x", codeLimit, off)
		}
		for p := uint32(0); p < nCode; p++ {
			start := base + int64(p)*page
			end := min(start+page, base+int64(codeLimit))
			h := sha256.Sum256(data[start:end])
			at := int(hashOff) + int(p)*hashSize
			if at+hashSize > len(cd) || !bytes.Equal(cd[at:at+hashSize], h[:]) {
				return fmt.Errorf("page %d: hash does not match", p)
			}
		}
		return nil
	}
	return errors.New("no CodeDirectory")
}

// idDylib returns the LC_ID_DYLIB name.
func idDylib(f *macho.File) string {
	for _, l := range f.Loads {
		raw := l.Raw()
		if len(raw) >= 24 && f.ByteOrder.Uint32(raw) == 0xd {
			off := f.ByteOrder.Uint32(raw[8:])
			if int(off) < len(raw) {
				name := raw[off:]
				if i := bytes.IndexByte(name, 0); i >= 0 {
					name = name[:i]
				}
				return string(name)
			}
		}
	}
	return ""
}

// slicesOf opens a thin or universal Mach-O file: arch name (as machobind spells it) -> file.
func slicesOf(path string) (map[string]*macho.File, func(), error) {
	archName := func(c macho.Cpu) string {
		switch c {
		case macho.CpuArm64:
			return "arm64"
		case macho.CpuAmd64:
			return "x86_64"
		}
		return c.String()
	}
	if ff, err := macho.OpenFat(path); err == nil {
		m := map[string]*macho.File{}
		for _, a := range ff.Arches {
			m[archName(a.Cpu)] = a.File
		}
		return m, func() { ff.Close() }, nil
	} else if !errors.Is(err, macho.ErrNotFat) {
		return nil, nil, err
	}
	f, err := macho.Open(path)
	if err != nil {
		return nil, nil, err
	}
	return map[string]*macho.File{archName(f.Cpu): f}, func() { f.Close() }, nil
}

func isObjcMsgSend(name string) bool { return strings.HasPrefix(name, "_objc_msgSend") }

// checkDylib checks a thin or universal dylib.
func checkDylib(art artifact, path string, exports []string) {
	d, err := runDump(path)
	if err != nil {
		fail(art.path, "%v", err)
		return
	}
	fs, closeAll, err := slicesOf(path)
	if err != nil {
		fail(art.path, "%v", err)
		return
	}
	defer closeAll()
	masks, err := masksOfFile(path)
	if err != nil {
		fail(art.path, "reading the fallback masks: %v", err)
	}
	var got []string
	for _, s := range d.Slices {
		got = append(got, s.Arch)
	}
	sort.Strings(got)
	if !slices.Equal(got, art.archs) {
		fail(art.path, "architectures %v, want %v", got, art.archs)
	}
	for _, s := range d.Slices {
		where := art.path + " [" + s.Arch + "]"
		if s.Error != "" {
			fail(where, "machobind dump: %s", s.Error)
		}
		if s.Filetype != "dylib" {
			fail(where, "file type %q, want dylib", s.Filetype)
		}
		if !strings.EqualFold(s.Platform, platformNames[art.platform]) {
			fail(where, "machobind dump says platform %q, want %s", s.Platform, platformNames[art.platform])
		}
		if want := wantMinOS(art.platform); !sameVersion(s.MinOS, want) {
			fail(where, "minimum OS %s, want %s", s.MinOS, want)
		}
		for _, l := range s.Dylibs {
			if !allowedDylib(art.platform, l.Path) {
				fail(where, "loads %s, which is not one of the system libraries it may depend on", l.Path)
			}
		}
		f := fs[s.Arch]
		if f == nil {
			fail(where, "debug/macho does not see this slice")
			continue
		}
		signNote := ""
		switch {
		case s.Arch != "arm64":
		case art.platform == platformIOS && !hasCodeSignature(f):
			signNote = "; unsigned (Xcode signs it: Embed & Sign)"
		default: // arm64 macOS and the arm64 simulator load only validly signed code
			if err := checkCodeSignature(path, f); err != nil {
				fail(where, "code signature: %v (arm64 %s loads only validly signed code)", err, s.Platform)
			}
		}
		want := art.install
		if want == "" {
			want = installName
		}
		if id := idDylib(f); id != want {
			fail(where, "install name %q, want %q", id, want)
		}
		syms := readSymbols(f)
		for _, e := range exports {
			if !syms.exported["_"+e] {
				fail(where, "does not export %s", e)
			}
		}
		// runtime/cgo built for the library's platform: for iOS (arm64) it looks for the app's
		// main bundle, for macOS it must not
		switch {
		case art.platform == platformMacOS && syms.undefined["_CFBundleGetMainBundle"]:
			fail(where, "imports CFBundleGetMainBundle: runtime/cgo was compiled with TARGET_OS_IPHONE for a macOS library")
		case art.platform != platformMacOS && s.Arch == "arm64" && !syms.undefined["_CFBundleGetMainBundle"]:
			fail(where, "does not import CFBundleGetMainBundle: runtime/cgo was not compiled with TARGET_OS_IPHONE")
		}
		// the library's own objc_msgSend imports: every one the symbol table names must be a slot
		// machobind lists (those are the slots the rebinder skips, since they are in its own image)
		slots := map[string][]string{}
		for _, p := range s.Pointers {
			if isObjcMsgSend(p.Symbol) {
				slots[p.Symbol] = append(slots[p.Symbol], p.Section+" "+p.Kind)
			}
		}
		for _, u := range slices.Sorted(maps.Keys(syms.undefined)) {
			if isObjcMsgSend(u) && len(slots[u]) == 0 {
				fail(where, "imports %s but machobind dump lists no pointer slot for it", u)
			}
		}
		maskNote := "masks MISSING"
		if m, ok := masks[s.Arch]; ok {
			maskNote = checkMasks(where, art.platform, s.Arch, m[0], m[1])
		} else {
			fail(where, "defines no _msgtrace_isa_mask/_msgtrace_tag_mask (the interposers' fallback masks)")
		}
		imp := "none (no objc_msgSend slot: skipping its own image loses nothing)"
		if len(slots) > 0 {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(slots)) {
				parts = append(parts, fmt.Sprintf("%s in %s", k, strings.Join(slots[k], ", ")))
			}
			imp = strings.Join(parts, "; ") + " (in its own image: not rebound)"
		}
		inits := checkInitializers(where, f, s.Fixups == "chained") + "; " + checkLoadAnchor(where, f)
		od := crossCheckObjdump(where, path, s, exports)
		fmt.Printf("ok  %-38s %-7s %-13s min %-5s %d exports, %d dylibs, %d pointer slots, %s; objc_msgSend imports: %s%s\n",
			art.path, s.Arch, s.Platform, s.MinOS, len(exports), len(s.Dylibs), len(s.Pointers), maskNote, imp, signNote)
		fmt.Printf("    %s; %s\n", inits, od)
	}
}

// checkArchive checks a thin or universal static archive, one architecture at a time.
func checkArchive(art artifact, path string, exports []string, tmp string) {
	// (llvm-lipo-19 -archs crashes on thin archives: tell them apart by the fat magic)
	magic := make([]byte, 4)
	if f, err := os.Open(path); err == nil {
		f.Read(magic)
		f.Close()
	}
	fat := bytes.Equal(magic, []byte{0xca, 0xfe, 0xba, 0xbe})
	archs := art.archs[:1]
	if fat {
		out, err := exec.Command(*flagLipo, "-archs", path).Output()
		if err != nil {
			fail(art.path, "%s -archs: %v", *flagLipo, err)
			return
		}
		archs = strings.Fields(string(out))
		sort.Strings(archs)
	}
	if !fat && len(art.archs) > 1 || !slices.Equal(archs, art.archs) {
		fail(art.path, "architectures %v (universal: %v), want %v", archs, fat, art.archs)
	}
	for _, arch := range archs {
		where := art.path + " [" + arch + "]"
		dir := filepath.Join(tmp, strings.NewReplacer("/", "_", ".", "_").Replace(art.path)+"-"+arch)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fail(where, "%v", err)
			return
		}
		thin := path
		if fat {
			thin = filepath.Join(dir, "thin.a")
			if out, err := exec.Command(*flagLipo, "-thin", arch, "-output", thin, path).CombinedOutput(); err != nil {
				fail(where, "%s -thin: %v: %s", *flagLipo, err, out)
				continue
			}
		}
		checkThinArchive(art, where, arch, thin, filepath.Join(dir, "members"), exports, tmp)
	}
}

func checkThinArchive(art artifact, where, arch, path, dir string, exports []string, tmp string) {
	list, err := exec.Command(*flagAr, "t", path).Output()
	if err != nil {
		fail(where, "%s t: %v", *flagAr, err)
		return
	}
	members := strings.Fields(string(list))
	if len(members) == 0 {
		fail(where, "empty archive")
		return
	}
	if dup := duplicates(members); len(dup) > 0 {
		fail(where, "members with the same name (extraction would merge them): %v", dup)
		return
	}
	abs, _ := filepath.Abs(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail(where, "%v", err)
		return
	}
	cmd := exec.Command(*flagAr, "x", abs)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		fail(where, "%s x: %v: %s", *flagAr, err, out)
		return
	}
	exported, defined, undefined := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var minos, platName string
	var maskMembers []string
	maskNote := "masks MISSING"
	// the same problem in many members is reported once, with the members it concerns
	var problems []string
	inMembers := map[string][]string{}
	memberFail := func(m, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if inMembers[msg] == nil {
			problems = append(problems, msg)
		}
		inMembers[msg] = append(inMembers[msg], m)
	}
	for _, m := range members {
		mp := filepath.Join(dir, m)
		d, err := runDump(mp)
		if err != nil {
			memberFail(m, "%v", err)
			continue
		}
		if len(d.Slices) != 1 {
			memberFail(m, "%d slices, want 1", len(d.Slices))
			continue
		}
		s := d.Slices[0]
		if s.Error != "" {
			memberFail(m, "machobind dump: %s", s.Error)
		}
		if s.Arch != arch {
			memberFail(m, "architecture %s, want %s", s.Arch, arch)
		}
		if s.Filetype != "object" {
			memberFail(m, "file type %q, want object", s.Filetype)
		}
		if !strings.EqualFold(s.Platform, platformNames[art.platform]) {
			memberFail(m, "machobind dump says platform %q, want %s", s.Platform, platformNames[art.platform])
		}
		platName = s.Platform
		if minos == "" {
			minos = s.MinOS
		}
		if want := wantMinOS(art.platform); !sameVersion(s.MinOS, want) {
			memberFail(m, "minimum OS %s, want %s", s.MinOS, want)
		}
		f, err := macho.Open(mp)
		if err != nil {
			memberFail(m, "%v", err)
			continue
		}
		syms := readSymbols(f)
		f.Close()
		if mm, err := masksOfFile(mp); err != nil {
			memberFail(m, "reading the fallback masks: %v", err)
		} else if v, ok := mm[arch]; ok {
			maskMembers = append(maskMembers, m)
			maskNote = checkMasks(where+" "+m, art.platform, arch, v[0], v[1])
		}
		for k := range syms.defined {
			defined[k] = true
		}
		for k := range syms.exported {
			exported[k] = true
		}
		for k := range syms.undefined {
			undefined[k] = true
		}
	}
	for _, msg := range problems {
		ms := inMembers[msg]
		if len(ms) == len(members) {
			fail(where, "%s (all %d members)", msg, len(ms))
		} else {
			fail(where, "%s (members %s)", msg, strings.Join(ms, " "))
		}
	}
	if len(maskMembers) != 1 {
		fail(where, "%d members define the interposers' fallback masks (%s), want 1", len(maskMembers), strings.Join(maskMembers, " "))
	}
	for k := range defined {
		delete(undefined, k)
	}
	for _, e := range exports {
		if !exported["_"+e] {
			fail(where, "does not define %s (global, not private extern)", e)
		}
	}
	for _, u := range slices.Sorted(maps.Keys(undefined)) {
		if strings.HasPrefix(u, "_msgtrace") || strings.HasPrefix(u, "__cgo") || strings.HasPrefix(u, "_x_cgo") {
			fail(where, "%s is referenced but defined by no member", u)
		}
	}
	// iOS arm64: Go's runtime/cgo (gcc_darwin_arm64.c) looks for the app bundle only when
	// compiled with TARGET_OS_IPHONE; its amd64 file has no iOS code to look for.
	if arch == "arm64" && !undefined["_CFBundleGetMainBundle"] {
		fail(where, "no reference to CFBundleGetMainBundle: runtime/cgo was not compiled with TARGET_OS_IPHONE")
	}
	var objc []string
	for _, u := range slices.Sorted(maps.Keys(undefined)) {
		if isObjcMsgSend(u) {
			objc = append(objc, u)
		}
	}
	// Linked into a host, the archive's references become the host's imports, and there the
	// rebinder exempts no image (the host's own sends are the ones to trace): a reference here
	// would have the library tracing, and recursing into, itself.
	imp := "none"
	if len(objc) > 0 {
		fail(where, "references %s: in a host these are rebound with the host's own sends", strings.Join(objc, ", "))
		imp = strings.Join(objc, ", ")
	}
	linked := "link test skipped"
	if !*flagNoLink {
		if err := linkTest(art, arch, minos, path, undefined, exports, filepath.Join(tmp, "link")); err != nil {
			fail(where, "link test: %v", err)
			linked = "link test FAILED"
		} else {
			linked = "links"
		}
	}
	fmt.Printf("ok  %-38s %-7s %-13s min %-5s %d members, %d exports, %s, %s; objc_msgSend references: %s\n",
		art.path, arch, platName, minos, len(members), len(exports), maskNote, linked, imp)
}

func duplicates(xs []string) []string {
	seen, dup := map[string]bool{}, []string{}
	for _, x := range xs {
		if seen[x] {
			dup = append(dup, x)
		}
		seen[x] = true
	}
	return dup
}

// linkTest links a program that takes the address of every exported function into an
// executable for the archive's target: ld64.lld must resolve every symbol the archive needs
// (libSystem: zig's complete macOS list retargeted to iOS; libresolv, libobjc, CoreFoundation:
// the SDK stubs). CoreFoundation symbols the stub does not list yet are allowed undefined (-U)
// and named. The result is dumped and must be an executable of the same platform.
func linkTest(art artifact, arch, minos, archive string, undefined map[string]bool, exports []string, dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "lib"), 0o755); err != nil {
		return err
	}
	tbd := filepath.Join(dir, "lib", "libSystem.tbd")
	if _, err := os.Stat(tbd); err != nil {
		src, err := os.ReadFile(*flagLibSystem)
		if err != nil {
			return err
		}
		src = regexp.MustCompile(`\barm64-macos\b`).ReplaceAll(src, []byte("arm64-ios, arm64-ios-simulator"))
		src = regexp.MustCompile(`\bx86_64-macos\b`).ReplaceAll(src, []byte("x86_64-ios-simulator"))
		if err := os.WriteFile(tbd, src, 0o644); err != nil {
			return err
		}
	}
	var main bytes.Buffer
	main.WriteString("#include \"msgtrace.h\"\nint main(void) {\n\tvolatile const void *fns[] = {\n")
	for _, e := range exports {
		fmt.Fprintf(&main, "\t\t(const void *)%s,\n", e)
	}
	main.WriteString("\t};\n\treturn fns[0] == 0;\n}\n")
	mainC := filepath.Join(dir, "main.c")
	if err := os.WriteFile(mainC, main.Bytes(), 0o644); err != nil {
		return err
	}
	target := map[string]string{"arm64": "arm64", "x86_64": "x86_64"}[arch] + "-apple-ios" + minos
	if art.platform == platformIOSSimulator {
		target += "-simulator"
	}
	cfStub, err := os.ReadFile(filepath.Join(*flagSDK, "System/Library/Frameworks/CoreFoundation.framework/CoreFoundation.tbd"))
	if err != nil {
		return err
	}
	exe := filepath.Join(dir, filepath.Base(filepath.Dir(art.path))+"-"+arch)
	args := []string{"-target", target, "-fuse-ld=lld", "-nostdlib", "-Wall", "-Werror", "-isysroot", *flagSDK,
		"-I", headerDir, "-L", filepath.Join(dir, "lib"),
		"-L", filepath.Join(*flagSDK, "usr/lib"), "-F", filepath.Join(*flagSDK, "System/Library/Frameworks"),
		"-o", exe, mainC, archive, "-lSystem", "-lresolv", "-lobjc", "-framework", "CoreFoundation"}
	var missing []string
	for _, u := range slices.Sorted(maps.Keys(undefined)) {
		if (strings.HasPrefix(u, "_CF") || strings.HasPrefix(u, "___CF") || strings.HasPrefix(u, "_kCF")) &&
			!regexp.MustCompile(`[\s\[,]`+regexp.QuoteMeta(u)+`[\s\],]`).Match(cfStub) {
			missing = append(missing, u)
			args = append(args, "-Wl,-U,"+u)
		}
	}
	out, err := exec.Command(*flagClang, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", *flagClang, strings.Join(args, " "), err, out)
	}
	if len(missing) > 0 && !notedCF[strings.Join(missing, " ")] {
		notedCF[strings.Join(missing, " ")] = true
		fmt.Printf("    note: sdk CoreFoundation.tbd does not list %s: allowed undefined in the link test\n", strings.Join(missing, " "))
	}
	d, err := runDump(exe)
	if err != nil {
		return err
	}
	if len(d.Slices) != 1 || d.Slices[0].Filetype != "execute" || d.Slices[0].Arch != arch ||
		!strings.EqualFold(d.Slices[0].Platform, platformNames[art.platform]) {
		return fmt.Errorf("linked program is not a %s %s executable: %+v", arch, platformNames[art.platform], d.Slices)
	}
	return nil
}

var (
	headerDir string
	notedCF   = map[string]bool{}
)

var declRE = regexp.MustCompile(`\b(msgtrace_[a-z_]*)\s*\(`)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: crosscheck [flags] OUTDIR\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	outdir := flag.Arg(0)
	headerDir, _ = filepath.Abs(outdir)
	var exports []string
	if *flagSymbols != "" {
		for _, s := range strings.Split(*flagSymbols, ",") {
			if s = strings.TrimSpace(s); s != "" {
				exports = append(exports, s)
			}
		}
	} else {
		h, err := os.ReadFile(filepath.Join(outdir, "msgtrace.h"))
		if err != nil {
			fmt.Fprintf(os.Stderr, "crosscheck: %v\n", err)
			os.Exit(1)
		}
		seen := map[string]bool{}
		for _, m := range declRE.FindAllSubmatch(stripComments(h), -1) {
			if n := string(m[1]); !seen[n] {
				seen[n] = true
				exports = append(exports, n)
			}
		}
	}
	if len(exports) == 0 {
		fmt.Fprintf(os.Stderr, "crosscheck: no msgtrace_* functions to look for\n")
		os.Exit(1)
	}
	fmt.Printf("crosscheck: %s: %d exported functions expected: %s\n", outdir, len(exports), strings.Join(exports, " "))
	tmp, err := os.MkdirTemp("", "crosscheck")
	if err != nil {
		fmt.Fprintf(os.Stderr, "crosscheck: %v\n", err)
		os.Exit(1)
	}
	defer os.RemoveAll(tmp)
	for _, art := range artifacts {
		path := filepath.Join(outdir, art.path)
		if _, err := os.Stat(path); err != nil {
			fail(art.path, "missing")
			continue
		}
		if art.archive {
			checkArchive(art, path, exports, tmp)
		} else {
			checkDylib(art, path, exports)
		}
	}
	checkXCFramework(outdir)
	for _, fw := range frameworks {
		checkFramework(outdir, fw)
		if !*flagNoLink {
			appLinkTest(outdir, fw, tmp)
		}
	}
	checkDynamicXCFramework(outdir)
	if failures > 0 {
		fmt.Fprintf(os.Stderr, "crosscheck: %d problems\n", failures)
		os.Exit(1)
	}
	fmt.Printf("crosscheck: all artifacts in %s check out\n", outdir)
}

// checkXCFramework: the framework's libraries and headers are the checked files, byte for byte.
func checkXCFramework(outdir string) {
	xc := filepath.Join(outdir, "libmsgtrace.xcframework")
	pairs := [][2]string{
		{"ios-arm64/libmsgtrace.a", "ios-arm64/libmsgtrace.a"},
		{"ios-arm64_x86_64-simulator/libmsgtrace.a", "ios-simulator/libmsgtrace.a"},
		{"ios-arm64/Headers/msgtrace.h", "msgtrace.h"},
		{"ios-arm64_x86_64-simulator/Headers/msgtrace.h", "msgtrace.h"},
	}
	for _, p := range pairs {
		a, err1 := os.ReadFile(filepath.Join(xc, p[0]))
		b, err2 := os.ReadFile(filepath.Join(outdir, p[1]))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			fail("libmsgtrace.xcframework/"+p[0], "missing or not the same as %s", p[1])
		}
	}
	plist, err := os.ReadFile(filepath.Join(xc, "Info.plist"))
	if err != nil {
		fail("libmsgtrace.xcframework/Info.plist", "%v", err)
		return
	}
	for _, want := range []string{"<string>ios-arm64</string>", "<string>ios-arm64_x86_64-simulator</string>", "<string>simulator</string>", "<string>XFWK</string>"} {
		if !bytes.Contains(plist, []byte(want)) {
			fail("libmsgtrace.xcframework/Info.plist", "does not contain %s", want)
		}
	}
	fmt.Printf("ok  %-38s device + simulator archives and headers identical to the checked files\n", "libmsgtrace.xcframework")
}

// stripComments removes C comments, so that prose mentioning msgtrace_x( is not a declaration.
func stripComments(src []byte) []byte {
	src = regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAll(src, nil)
	return regexp.MustCompile(`//[^\n]*`).ReplaceAll(src, nil)
}
