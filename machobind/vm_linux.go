//go:build linux

package machobind

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
)

// ProcVM implements the page-protection part of a Runtime on Linux: mprotect to change a
// protection, /proc/self/maps to read it back. It is a MappingLister: the Rebinder reads the
// maps once for all the slots it writes at a time.
type ProcVM struct{}

// PageSize returns the kernel's page size.
func (ProcVM) PageSize() uintptr { return uintptr(os.Getpagesize()) }

// Protection returns the protection of the mapping that holds addr.
func (vm ProcVM) Protection(addr uintptr) (Prot, error) {
	maps, err := vm.Mappings()
	if err != nil {
		return 0, err
	}
	for _, m := range maps {
		if addr >= m.Lo && addr < m.Hi {
			return m.Prot, nil
		}
	}
	return 0, fmt.Errorf("address %#x is not mapped", addr)
}

// Mappings reads /proc/self/maps: every mapping of the process with its protection, in
// address order.
func (ProcVM) Mappings() ([]Mapping, error) {
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	out := make([]Mapping, 0, bytes.Count(data, []byte{'\n'})+1)
	for len(data) > 0 {
		line := data
		if nl := bytes.IndexByte(data, '\n'); nl >= 0 {
			line, data = data[:nl], data[nl+1:]
		} else {
			data = nil
		}
		// "start-end perms offset dev inode path"
		lo, n1 := parseHex(line)
		if n1 == 0 || n1 >= len(line) || line[n1] != '-' {
			continue
		}
		hi, n2 := parseHex(line[n1+1:])
		sp := n1 + 1 + n2
		if n2 == 0 || len(line) < sp+4 || line[sp] != ' ' {
			continue
		}
		var p Prot
		perms := line[sp+1 : sp+4]
		if perms[0] == 'r' {
			p |= ProtRead
		}
		if perms[1] == 'w' {
			p |= ProtWrite
		}
		if perms[2] == 'x' {
			p |= ProtExec
		}
		out = append(out, Mapping{Lo: uintptr(lo), Hi: uintptr(hi), Prot: p})
	}
	return out, nil
}

// parseHex reads the lower-case hexadecimal number at the start of b: its value and the number
// of digits (0: none, or more than 16).
func parseHex(b []byte) (uint64, int) {
	var v uint64
	n := 0
	for ; n < len(b); n++ {
		c := b[n]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			return v, n
		}
		if n == 16 {
			return 0, 0
		}
		v = v<<4 | uint64(c)
	}
	return v, n
}

// Protect changes the protection of page-aligned memory.
func (ProcVM) Protect(addr, size uintptr, p Prot) error {
	_, _, errno := syscall.Syscall(syscall.SYS_MPROTECT, addr, size, uintptr(p))
	if errno != 0 {
		return errno
	}
	return nil
}
