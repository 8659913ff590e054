//go:build linux

package machobind

import (
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// TestParseLoadedUnmapped: an image unmapped between its listing and its reading (a dlclose on
// another thread) is an error for that image, not a fault that kills the traced program.
func TestParseLoadedUnmapped(t *testing.T) {
	page, err := syscall.Mmap(-1, 0, syscall.Getpagesize(), syscall.PROT_READ, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	addr := uintptr(unsafe.Pointer(&page[0]))
	if err := syscall.Munmap(page); err != nil {
		t.Fatal(err)
	}
	for _, elf := range []bool{true, false} {
		img, err := parseLoaded(Loaded{Name: "gone", Header: addr, Slide: addr, ELF: elf})
		if err == nil || img != nil || !strings.Contains(err.Error(), "unreadable") {
			t.Errorf("ELF %v: image %v, error %v; want an unreadable error", elf, img, err)
		}
	}
}

// TestWriteUnmapped: an image unloaded between its reading and the write of its slots (its
// pages unmapped, though the protections read before say writable) is an error for that image,
// not a fault that kills the traced program, and the slots before it are written.
func TestWriteUnmapped(t *testing.T) {
	ps := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*ps, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	live, gone := uintptr(unsafe.Pointer(&mem[0])), uintptr(unsafe.Pointer(&mem[ps]))
	defer syscall.Syscall(syscall.SYS_MUNMAP, live, uintptr(ps), 0)
	if _, _, e := syscall.Syscall(syscall.SYS_MUNMAP, gone, uintptr(ps), 0); e != 0 {
		t.Fatal(e)
	}
	r := NewRebinder(&simRuntime{})
	var written []uintptr
	err = r.writeSlots([]match{{addr: live}, {addr: gone + 8}}, func(uintptr) (Prot, error) { return ProtRead | ProtWrite, nil },
		func(match) (uintptr, error) { return 0x5150, nil }, func(m match, _, _ uintptr) { written = append(written, m.addr) })
	if err == nil || !strings.Contains(err.Error(), "unwritable") {
		t.Fatalf("error %v, want the unmapped slot unwritable", err)
	}
	if len(written) != 1 || written[0] != live || loadSlot(live) != 0x5150 {
		t.Fatalf("written %#x (live slot holds %#x), want the live slot only", written, loadSlot(live))
	}
}
