package main

import (
	"encoding/binary"
	"fmt"

	gomacho "github.com/blacktop/go-macho"
	"github.com/blacktop/go-macho/types"
)

// LC_BUILD_VERSION platforms beyond the three the artifacts use (mach-o/loader.h).
const (
	platformTVOS            = 3
	platformMacCatalyst     = 6
	platformTVOSSimulator   = 8
	platformWatchOSSim      = 9
	platformVisionOS        = 11
	platformVisionOSSimulat = 12
)

// maskWant is what objc4 says the Objective-C runtime uses on a target: the tagged-pointer
// mask (objc_debug_taggedpointer_mask) and the class mask (objc_debug_isa_class_mask). The
// fallback masks compiled into rt.c (msgtrace_tag_mask, msgtrace_isa_mask) must be these.
type maskWant struct {
	tag, class uint64
	why        string
}

const (
	lsbTag      = 1
	msbTag      = 1 << 63
	class47     = 0x00007ffffffffff8 // ISA_MASK limited to a macOS process's address space
	class36     = 0x0000000ffffffff8 // ISA_MASK limited to an arm64 device's address space
	objcVersion = "objc4-951.1"
	// unalignedBits are in every fallback tag mask besides objc4's (rt.h MT_UNALIGNED_BITS):
	// an unaligned receiver is never dereferenced.
	unalignedBits = 7
)

// wantMasks is the table, from objc4-951.1 (apple-oss-distributions/objc4):
//   - runtime/objc-internal.h: OBJC_MSB_TAGGED_POINTERS is 0 (tag bit = LSB) only for
//     (TARGET_OS_OSX || TARGET_OS_MACCATALYST) && __x86_64__; "Everything else - tag bit is
//     MSB", the x86_64 simulators included. _OBJC_TAG_MASK is 1UL or 1UL<<63.
//   - runtime/objc-runtime-new.mm: objc_debug_isa_class_mask = ISA_MASK &
//     coveringMask(OBJC_VM_MAX_ADDRESS - 1); OBJC_VM_MAX_ADDRESS is MACH_VM_MAX_ADDRESS
//     (runtime/objc-vm.h): x86_64 0x7FFFFFE00000 (xnu osfmk/mach/i386/vm_param.h), arm64
//     0x7FFFFE000000 on macOS, 0xFC0000000 elsewhere (osfmk/mach/arm/vm_param.h).
//   - runtime/isa.h: ISA_MASK is 0x00007ffffffffff8 on x86_64; on arm64 0x007ffffffffffff8
//     with ptrauth "|| TARGET_OS_SIMULATOR" ("ARM64 simulators have a larger address space"),
//     else 0x0000000ffffffff8. A macOS process on Apple silicon, arm64 or arm64e, runs the
//     arm64e runtime of the shared cache: ISA_MASK 0x007ffffffffffff8 & 47 bits.
func wantMasks(platform uint32, arch string) (maskWant, bool) {
	mac := "a macOS process"
	switch arch {
	case "x86_64":
		switch platform {
		case platformMacOS, platformMacCatalyst:
			return maskWant{lsbTag, class47, objcVersion + " objc-internal.h: LSB tags on x86_64 macOS/Catalyst; isa.h x86_64 ISA_MASK"}, true
		case platformIOSSimulator, platformTVOSSimulator, platformWatchOSSim, platformVisionOSSimulat:
			return maskWant{msbTag, class47, objcVersion + " objc-internal.h: MSB tags everywhere else (x86_64 simulator); isa.h x86_64 ISA_MASK"}, true
		}
	case "arm64", "arm64e":
		switch platform {
		case platformMacOS, platformMacCatalyst:
			return maskWant{msbTag, class47, objcVersion + " isa.h ptrauth ISA_MASK & " + mac + "'s 47-bit space (arm64e runtime)"}, true
		case platformIOSSimulator, platformTVOSSimulator, platformWatchOSSim, platformVisionOSSimulat:
			return maskWant{msbTag, class47, objcVersion + " isa.h simulator ISA_MASK & " + mac + "'s 47-bit space"}, true
		case platformIOS, platformTVOS, platformVisionOS:
			return maskWant{msbTag, class36, objcVersion + " isa.h ISA_MASK & the device's 36-bit space"}, true
		}
	}
	return maskWant{}, false
}

// readMasks reads the fallback masks rt.c compiled into a Mach-O image or object: the 8-byte
// initial values of _msgtrace_isa_mask and _msgtrace_tag_mask. found is false when the file
// defines neither (an archive member other than rt.c's).
func readMasks(f *gomacho.File) (class, tag uint64, found bool, err error) {
	var got [2]bool
	for i, name := range []string{"_msgtrace_isa_mask", "_msgtrace_tag_mask"} {
		v, ok, err := readDataSymbol(f, name)
		if err != nil {
			return 0, 0, true, err
		}
		got[i] = ok
		if i == 0 {
			class = v
		} else {
			tag = v
		}
	}
	if got[0] != got[1] {
		return 0, 0, true, fmt.Errorf("defines only one of _msgtrace_isa_mask, _msgtrace_tag_mask")
	}
	return class, tag, got[0], nil
}

// readDataSymbol reads the 8-byte initial value of a defined data symbol from its section.
func readDataSymbol(f *gomacho.File, name string) (uint64, bool, error) {
	if f.Symtab == nil {
		return 0, false, nil
	}
	for _, s := range f.Symtab.Syms {
		const nStab, nType, nSect = 0xe0, 0x0e, 0x0e
		if s.Name != name || uint8(s.Type)&nStab != 0 || uint8(s.Type)&nType != nSect {
			continue
		}
		if s.Sect == 0 || int(s.Sect) > len(f.Sections) {
			return 0, true, fmt.Errorf("%s: section %d does not exist", name, s.Sect)
		}
		sec := f.Sections[s.Sect-1]
		if s.Value < sec.Addr || s.Value+8 > sec.Addr+sec.Size {
			return 0, true, fmt.Errorf("%s at %#x is not inside %s,%s", name, s.Value, sec.Seg, sec.Name)
		}
		if sec.Flags&0xff == 1 { // S_ZEROFILL: no bytes in the file, the value is 0
			return 0, true, nil
		}
		data, err := sec.Data()
		if err != nil {
			return 0, true, fmt.Errorf("%s: reading %s,%s: %v", name, sec.Seg, sec.Name, err)
		}
		off := s.Value - sec.Addr
		return binary.LittleEndian.Uint64(data[off : off+8]), true, nil
	}
	return 0, false, nil
}

// checkMasks compares the masks read from a slice (or archive member) with the table.
func checkMasks(where string, platform uint32, arch string, class, tag uint64) string {
	w, ok := wantMasks(platform, arch)
	if !ok {
		fail(where, "no objc4 masks known for platform %d, %s", platform, arch)
		return "masks ?"
	}
	if want := w.tag | unalignedBits; class != w.class || tag != want {
		fail(where, "fallback masks class %#x tag %#x, want class %#x tag %#x (%s, and the unaligned bits)", class, tag, w.class, want, w.why)
		return "masks WRONG"
	}
	return fmt.Sprintf("masks class %#x tag %#x", class, tag)
}

// masksOfFile reads the fallback masks of every slice of a thin or universal file, by
// architecture (machobind's names). A slice that defines no masks is absent from the result.
func masksOfFile(path string) (map[string][2]uint64, error) {
	out := map[string][2]uint64{}
	read := func(f *gomacho.File) error {
		class, tag, found, err := readMasks(f)
		if err != nil {
			return err
		}
		if found {
			out[archOf(f)] = [2]uint64{class, tag}
		}
		return nil
	}
	if ff, err := gomacho.OpenFat(path); err == nil {
		defer ff.Close()
		for _, a := range ff.Arches {
			if err := read(a.File); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	f, err := gomacho.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return out, read(f)
}

func archOf(f *gomacho.File) string {
	switch f.CPU {
	case types.CPUArm64:
		return "arm64"
	case types.CPUAmd64:
		return "x86_64"
	}
	return f.CPU.String()
}
