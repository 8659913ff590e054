//go:build linux

package machobind

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// ProcVM implements the page-protection part of a Runtime on Linux: mprotect to change a
// protection, the kernel's answer for one address (the PROCMAP_QUERY ioctl on
// /proc/self/maps, Linux 6.11 and later) or /proc/self/maps read whole to read it back. It is
// a MappingLister, and a PageProber that says whether the one-address answer is there: the
// Rebinder then asks page by page, else it reads the maps once for all the slots it writes at
// a time.
type ProcVM struct{}

// PageSize returns the kernel's page size.
func (ProcVM) PageSize() uintptr { return uintptr(os.Getpagesize()) }

// procmapQuery is the kernel's struct procmap_query (include/uapi/linux/fs.h), 104 bytes.
type procmapQuery struct {
	size, queryFlags, queryAddr          uint64
	vmaStart, vmaEnd, vmaFlags, pageSize uint64
	vmaOffset, inode                     uint64
	devMajor, devMinor                   uint32
	nameSize, buildIDSize                uint32
	nameAddr, buildIDAddr                uint64
}

const (
	// procmapQueryIoctl is _IOWR('f', 17, struct procmap_query).
	procmapQueryIoctl = 0xc0686611
	// the vma_flags bits
	procmapReadable, procmapWritable, procmapExecutable = 1, 2, 4
)

// query holds /proc/self/maps open for PROCMAP_QUERY: the file names the process that opened
// it, so a child forked since opens its own (pid), and a program may close it and open
// something else under its number (dev, ino: what it was). ok: the kernel answered a
// question; tried: the kernel was asked once.
var query struct {
	sync.Mutex
	fd, pid   int
	dev, ino  uint64
	ok, tried bool
}

// queryFdOurs reports whether query.fd is still the maps file query opened.
func queryFdOurs() bool {
	var st syscall.Stat_t
	return query.fd >= 0 && syscall.Fstat(query.fd, &st) == nil && uint64(st.Dev) == query.dev && uint64(st.Ino) == query.ino
}

// queryOpen opens /proc/self/maps for pid's questions; false when it cannot (query.fd -1).
func queryOpen(pid int) bool {
	query.fd = -1
	fd, err := syscall.Open("/proc/self/maps", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		syscall.Close(fd)
		return false
	}
	query.fd, query.pid, query.dev, query.ino = fd, pid, uint64(st.Dev), uint64(st.Ino)
	return true
}

// queryProt asks the kernel for the protection of the mapping that holds addr (PROCMAP_QUERY).
// handled is false when the kernel has no such question (before 6.11), /proc is not there,
// the question failed or the kernel found no mapping: the caller reads the maps instead.
func queryProt(addr uintptr) (p Prot, handled bool) {
	query.Lock()
	defer query.Unlock()
	pid := os.Getpid()
	if query.tried && !query.ok {
		return 0, false
	}
	if ours := query.tried && queryFdOurs(); !ours || query.pid != pid {
		if ours { // a forked child's copy of its parent's file
			syscall.Close(query.fd)
		}
		query.tried = true
		if !queryOpen(pid) {
			query.ok = false
			return 0, false
		}
	}
	q := procmapQuery{size: uint64(unsafe.Sizeof(procmapQuery{})), queryAddr: uint64(addr)}
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(query.fd), procmapQueryIoctl, uintptr(unsafe.Pointer(&q)))
	switch errno {
	case 0:
	case syscall.ENOENT: // no mapping of the process's own holds addr: the maps say (the
		// vsyscall page is listed there, not asked here), or that it is not mapped
		query.ok = true
		return 0, false
	default: // ENOTTY, EINVAL: a kernel without the question
		if !query.ok {
			syscall.Close(query.fd)
			query.fd = -1
		}
		return 0, false
	}
	query.ok = true
	if q.vmaFlags&procmapReadable != 0 {
		p |= ProtRead
	}
	if q.vmaFlags&procmapWritable != 0 {
		p |= ProtWrite
	}
	if q.vmaFlags&procmapExecutable != 0 {
		p |= ProtExec
	}
	return p, true
}

// ProbesPages reports whether Protection asks the kernel about one address (PROCMAP_QUERY)
// rather than reading every mapping (machobind.PageProber).
func (ProcVM) ProbesPages() bool {
	_, handled := queryProt(uintptr(unsafe.Pointer(&query)))
	return handled
}

// Protection returns the protection of the mapping that holds addr.
func (vm ProcVM) Protection(addr uintptr) (Prot, error) {
	if p, handled := queryProt(addr); handled {
		return p, nil
	}
	return vm.readProtection(addr)
}

// readProtection is Protection from /proc/self/maps read whole.
func (vm ProcVM) readProtection(addr uintptr) (Prot, error) {
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
