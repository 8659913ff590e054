//go:build linux

package machobind

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// ProcVM implements the page-protection part of a Runtime on Linux: mprotect to change a
// protection, /proc/self/maps to read it back.
type ProcVM struct{}

// PageSize returns the kernel's page size.
func (ProcVM) PageSize() uintptr { return uintptr(os.Getpagesize()) }

// Protection returns the protection of the mapping that holds addr.
func (ProcVM) Protection(addr uintptr) (Prot, error) {
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// "start-end perms offset dev inode path"
		line := sc.Bytes()
		dash := bytes.IndexByte(line, '-')
		sp := bytes.IndexByte(line, ' ')
		if dash < 0 || sp < dash || len(line) < sp+4 {
			continue
		}
		lo, err1 := strconv.ParseUint(string(line[:dash]), 16, 64)
		hi, err2 := strconv.ParseUint(string(line[dash+1:sp]), 16, 64)
		if err1 != nil || err2 != nil || uint64(addr) < lo || uint64(addr) >= hi {
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
		return p, nil
	}
	return 0, fmt.Errorf("address %#x is not mapped", addr)
}

// Protect changes the protection of page-aligned memory.
func (ProcVM) Protect(addr, size uintptr, p Prot) error {
	_, _, errno := syscall.Syscall(syscall.SYS_MPROTECT, addr, size, uintptr(p))
	if errno != 0 {
		return errno
	}
	return nil
}
