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
