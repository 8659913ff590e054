package machobind

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Loaded is a Mach-O image mapped into this process.
type Loaded struct {
	Name   string  // path it was loaded from, for messages
	Header uintptr // address of its mach header (ELF: of its ELF header)
	Slide  uintptr // difference between its load address and its preferred address
	ELF    bool    // an ELF object (the Linux backend) rather than a Mach-O image
}

// ptr converts an address in this process to a pointer without tripping vet's unsafeptr
// check: the addresses come from the dynamic linker, not from Go objects.
func ptr(addr uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&addr))
}

// memBytes returns n bytes of this process's memory at addr.
func memBytes(addr uintptr, n uint64) []byte {
	return unsafe.Slice((*byte)(ptr(addr)), n)
}

// loadSlot reads one pointer slot atomically.
func loadSlot(addr uintptr) uintptr { return atomic.LoadUintptr((*uintptr)(ptr(addr))) }

// storeSlot writes one pointer slot atomically: a thread calling through it sees the old or
// the new pointer, never a torn one.
func storeSlot(addr, v uintptr) { atomic.StoreUintptr((*uintptr)(ptr(addr)), v) }

// memSource reads an image as dyld mapped it: the header and load commands at the header
// address, __LINKEDIT at slide + vmaddr + (fileoff - segment fileoff).
type memSource Loaded

// maxHeaderBytes bounds the header read from memory: the load commands of a mapped image
// always lie inside its first page run of __TEXT.
const maxHeaderBytes = 32 + maxLoadCommandBytes

func (m memSource) HeaderBytes(n uint64) ([]byte, error) {
	if m.Header == 0 || n > maxHeaderBytes {
		return nil, fmt.Errorf("cannot read %d header bytes at %#x", n, m.Header)
	}
	return memBytes(m.Header, n), nil
}

func (m memSource) LinkeditBytes(off, n uint64, le *Segment) ([]byte, error) {
	if le == nil {
		return nil, fmt.Errorf("image at %#x has no __LINKEDIT segment", m.Header)
	}
	// The caller checked [off, off+n) against the segment's file range.
	return memBytes(m.Slide+uintptr(le.Addr)+uintptr(off-le.Offset), n), nil
}

// ParseLoaded parses an image mapped in this process, after checking that its header sits at
// the slid address of its __TEXT segment and that every pointer section lies inside its
// segment. Only 64-bit images are accepted (ErrNot64): rebinding writes 8-byte slots.
func ParseLoaded(l Loaded) (*Image, error) {
	img, err := Parse(memSource(l))
	if err != nil {
		return nil, err
	}
	if !img.Is64() {
		return nil, fmt.Errorf("32-bit Mach-O: %w", ErrNot64)
	}
	if img.textVMAddr+uint64(l.Slide) != uint64(l.Header) && img.Header.Type != 0x6 /* MH_DYLINKER */ {
		return nil, fmt.Errorf("header at %#x but __TEXT %#x + slide %#x = %#x", l.Header, img.textVMAddr, l.Slide, img.textVMAddr+uint64(l.Slide))
	}
	for _, seg := range img.Segments {
		for _, s := range seg.Sections {
			if _, isPtr := pointerKind(s); !isPtr {
				continue // only pointer sections are read or written (Go's __DWARF is not mapped)
			}
			if s.Addr < seg.Addr || s.Size > seg.Memsz || s.Addr-seg.Addr > seg.Memsz-s.Size {
				return nil, fmt.Errorf("section %s [%#x, +%#x) outside its segment [%#x, +%#x)", s.FullName(), s.Addr, s.Size, seg.Addr, seg.Memsz)
			}
		}
	}
	return img, nil
}
