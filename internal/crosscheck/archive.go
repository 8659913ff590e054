package main

// The static archives' checks, member by member (checkArchive, checkThinArchive), and the
// iOS link test each archive gets (linkTest).

import (
	"bytes"
	"debug/macho"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

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
