package msgtrace

/*
#include "rt.h"
*/
import "C"

import "unsafe"

// The interposers name a call by the receiver's class, read inline: a receiver with a bit of
// the tag mask set is a tagged pointer (it has no isa, the receiver itself is recorded); any
// other receiver's class is its isa & the class mask. Apple's runtime exports both masks for
// debuggers (objc4 runtime/objc-gdb.h: objc_debug_isa_class_mask, objc_debug_taggedpointer_mask;
// the latter is 0 when tagged pointers are disabled at run time), and Install reads them from
// the runtime the process has loaded. The values compiled into rt.c are the fallback, for a
// runtime that does not export them; they are objc4's own values for each target:
//
//	target                      tag mask   class mask          objc4-951
//	macOS, Mac Catalyst x86_64  1          0x00007ffffffffff8  objc-internal.h: OBJC_MSB_TAGGED_POINTERS 0
//	                                                           only for (TARGET_OS_OSX || TARGET_OS_MACCATALYST)
//	                                                           && __x86_64__; isa.h x86_64 ISA_MASK
//	simulators x86_64           1<<63      0x00007ffffffffff8  objc-internal.h: every other target uses the MSB
//	macOS, Catalyst arm64       1<<63      0x00007ffffffffff8  the process runs the arm64e runtime of the shared
//	                                                           cache: isa.h ptrauth ISA_MASK 0x007ffffffffffff8 &
//	                                                           coveringMask(MACH_VM_MAX_ADDRESS - 1), macOS bound
//	                                                           0x7FFFFE000000 (objc-runtime-new.mm, xnu
//	                                                           osfmk/mach/arm/vm_param.h)
//	simulators arm64            1<<63      0x00007ffffffffff8  isa.h: "ARM64 simulators have a larger address
//	                                                           space": the ptrauth layout, in a macOS process
//	devices arm64 (iOS, tvOS)   1<<63      0x0000000ffffffff8  isa.h ISA_MASK (arm64) = ISA_MASK (arm64e) &
//	                                                           coveringMask(0xFC0000000 - 1) (xnu, not macOS)
//	not Apple (GNUstep, tests)  0          ^0                  isa is the class; libobjc2's small objects:
//	                                                           the low bits, below
//
// Every tag mask the interposers use also has the low three bits set (unalignedBits, rt.h's
// MT_UNALIGNED_BITS): a receiver that is not 8-byte aligned is not an object pointer on any
// 64-bit runtime, so it is never dereferenced, and it is named through the runtime's
// object_getClass. These are GNUstep libobjc2's small objects (OBJC_SMALL_OBJECT_MASK, 7 on
// 64-bit: objc_registerSmallObjectClass_np gives the class of every receiver whose low bits are
// the class's index; gnustep-base registers small integers, floats, doubles and tiny strings).
//
// The class mask is objc_debug_isa_class_mask, not ISA_MASK, wherever the two differ (the
// ptrauth and arm64 simulator layouts keep the isa's signature in bits above the address).
// internal/crosscheck reads these values back from every artifact `make cross` builds.

// unalignedBits are in every tag mask (rt.h MT_UNALIGNED_BITS).
const unalignedBits = 7

// Masks are the masks the interposers use to find a receiver's class.
type Masks struct {
	Class  uint64 // isa & Class is the receiver's class
	Tag    uint64 // receiver & Tag != 0: a tagged pointer (at least unalignedBits)
	Source string // "runtime" when read from the Objective-C runtime, else "fallback"
}

// CurrentMasks returns the masks the interposers use now.
func CurrentMasks() Masks {
	return Masks{Class: uint64(C.msgtrace_isa_mask), Tag: uint64(C.msgtrace_tag_mask), Source: masksSource}
}

var masksSource = "fallback"

// Names of the runtime's exported masks (objc4 runtime/objc-gdb.h).
const (
	symClassMask = "objc_debug_isa_class_mask"
	symTagMask   = "objc_debug_taggedpointer_mask"
)

// runtimeMasks reads the masks the Objective-C runtime exports, through lookup (an exported
// data symbol's address, 0 if none). ok is false when the runtime exports neither: then the
// fallback stands. A runtime that exports only the class mask has no tagged pointers.
func runtimeMasks(lookup func(name string) uintptr) (m Masks, ok bool) {
	ca, ta := lookup(symClassMask), lookup(symTagMask)
	if ca == 0 {
		return Masks{}, false
	}
	m = Masks{Class: readWord(ca), Source: "runtime"}
	if m.Class == 0 { // a runtime that says no bit of isa is the class is not one to follow
		return Masks{}, false
	}
	if ta != 0 {
		m.Tag = readWord(ta)
	}
	m.Tag |= unalignedBits
	return m, true
}

// applyRuntimeMasks replaces the fallback with the runtime's masks, when it exports them. It
// runs before any slot points at an interposer.
func applyRuntimeMasks(lookup func(name string) uintptr) Masks {
	if m, ok := runtimeMasks(lookup); ok {
		C.msgtrace_isa_mask, C.msgtrace_tag_mask = C.uint64_t(m.Class), C.uint64_t(m.Tag)
		masksSource = m.Source
	}
	return CurrentMasks()
}

// readWord reads the 64-bit word at an address a symbol lookup returned.
func readWord(addr uintptr) uint64 {
	return *(*uint64)(*(*unsafe.Pointer)(unsafe.Pointer(&addr)))
}
