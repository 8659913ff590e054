//go:build linux

package simdyld

// Mapping: the image's segments mapped at their slid addresses, and the words in them.

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// mapped reports whether a segment occupies memory (not __PAGEZERO, not empty).
func (s *seg) mapped() bool { return s.name != "__PAGEZERO" && s.memsz != 0 }

const mapFixedNoReplace = 0x100000 // MAP_FIXED_NOREPLACE (Linux 4.17)

// mapSegments reserves one region for the vmaddr span of the mapped segments and copies each
// segment's file bytes in; the rest stays zero.
func (img *Image) mapSegments(data []byte, slide uint64) error {
	ps := uint64(os.Getpagesize())
	lo, hi := ^uint64(0), uint64(0)
	haveText := false
	for _, s := range img.segs {
		if !s.mapped() {
			continue
		}
		if s.addr+s.memsz < s.addr {
			return fmt.Errorf("segment %s wraps around", s.name)
		}
		if s.name == "__TEXT" {
			img.text, haveText = s.addr, true
		}
		lo, hi = min(lo, s.addr), max(hi, s.addr+s.memsz)
	}
	if !haveText {
		return errors.New("no __TEXT segment")
	}
	if hi-lo > 1<<34 {
		return fmt.Errorf("segments span %#x bytes", hi-lo)
	}
	for _, s := range img.segs {
		if s.mapped() && (s.addr-lo)%ps != 0 {
			return fmt.Errorf("segment %s at %#x is not aligned to this host's %#x-byte pages", s.name, s.addr, ps)
		}
	}
	size := (hi - lo + ps - 1) &^ (ps - 1)
	var want uintptr
	flags := uintptr(syscall.MAP_PRIVATE | syscall.MAP_ANONYMOUS)
	if slide != 0 {
		if slide%ps != 0 || lo+slide < lo {
			return fmt.Errorf("slide %#x is not a usable page multiple", slide)
		}
		want = uintptr(lo + slide)
		flags |= mapFixedNoReplace
	}
	for try := 0; ; try++ {
		p, _, e := syscall.Syscall6(syscall.SYS_MMAP, want, uintptr(size), syscall.PROT_READ|syscall.PROT_WRITE, flags, ^uintptr(0), 0)
		if e != 0 {
			return fmt.Errorf("mmap %#x bytes at %#x: %w", size, want, e)
		}
		// p is memory outside Go's heap; the conversion through a pointer keeps vet quiet.
		img.mem = unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), size)
		if want != 0 && p != want { // a kernel without MAP_FIXED_NOREPLACE took it as a hint
			img.Close()
			return fmt.Errorf("cannot map at slide %#x: the range is taken", slide)
		}
		if uint64(p) != lo || try > 2 { // slide 0 would hide missing rebases: never use it
			break
		}
		defer syscall.Syscall(syscall.SYS_MUNMAP, p, uintptr(size), 0) // keep the spot taken while retrying
	}
	img.base = lo
	start := uint64(uintptr(unsafe.Pointer(&img.mem[0])))
	img.Slide = uintptr(start - lo)
	img.Header = uintptr(start - lo + img.text)
	if img.Slide == 0 {
		img.Close()
		return errors.New("mmap keeps placing the image at slide 0")
	}
	for _, s := range img.segs {
		if !s.mapped() {
			continue
		}
		n := min(s.filesz, s.memsz) // Go's __DWARF has file bytes but no VM size: not mapped
		if s.off > uint64(len(data)) || n > uint64(len(data))-s.off {
			img.Close()
			return fmt.Errorf("segment %s file range [%#x,+%#x) past the file", s.name, s.off, n)
		}
		copy(img.mem[s.addr-lo:], data[s.off:s.off+n])
	}
	return nil
}

// word returns the 8 bytes of the mapping at an unslid address, which must lie in segment s
// (or, with s nil, anywhere in the mapping).
func (img *Image) word(vmaddr uint64, s *seg) ([]byte, error) {
	if s != nil && (vmaddr < s.addr || vmaddr-s.addr > s.memsz || s.memsz-(vmaddr-s.addr) < 8) {
		return nil, fmt.Errorf("fixup at %#x outside segment %s", vmaddr, s.name)
	}
	if vmaddr < img.base || vmaddr-img.base > uint64(len(img.mem)) || uint64(len(img.mem))-(vmaddr-img.base) < 8 {
		return nil, fmt.Errorf("fixup at %#x outside the image", vmaddr)
	}
	return img.mem[vmaddr-img.base:][:8], nil
}

// segmentAt returns the mapped segment holding an unslid address.
func (img *Image) segmentAt(vmaddr uint64) *seg {
	for i := range img.segs {
		s := &img.segs[i]
		if s.mapped() && vmaddr >= s.addr && vmaddr-s.addr < s.memsz {
			return s
		}
	}
	return nil
}
