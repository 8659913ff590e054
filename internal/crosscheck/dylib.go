package main

// The dylibs' checks: load commands, dependencies, install name, code signature, exports and
// objc_msgSend imports (checkDylib).

import (
	"bytes"
	"crypto/sha256"
	"debug/macho"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
)

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
