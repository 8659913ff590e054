//go:build linux

package simdyld

// Protections: dyld's final segment protections applied, and read back from
// /proc/self/maps (CurrentProtections).

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// protect gives each segment dyld's final protection: its initprot, except that SG_READ_ONLY
// segments and __DATA_CONST / __AUTH_CONST become read-only after fixups. Gaps between
// segments (dyld leaves them unmapped) are made read-only, so that Bytes can be read whole.
func (img *Image) protect() error {
	ps := uint64(os.Getpagesize())
	if err := mprotect(img.mem, syscall.PROT_READ); err != nil {
		return fmt.Errorf("mprotect gaps: %w", err)
	}
	for _, s := range img.segs {
		if !s.mapped() {
			continue
		}
		prot := int(s.initprot) & (syscall.PROT_READ | syscall.PROT_WRITE | syscall.PROT_EXEC)
		if s.name == "__DATA_CONST" || s.name == "__AUTH_CONST" || s.flags&sgReadOnly != 0 {
			prot = syscall.PROT_READ
		}
		off := s.addr - img.base
		n := (s.memsz + ps - 1) &^ (ps - 1)
		if err := mprotect(img.mem[off:off+n], prot); err != nil {
			return fmt.Errorf("mprotect %s: %w", s.name, err)
		}
		img.Segments = append(img.Segments, Segment{Name: s.name, Addr: s.addr + uint64(img.Slide), Size: n, Prot: prot})
	}
	return nil
}

func mprotect(b []byte, prot int) error {
	_, _, e := syscall.Syscall(syscall.SYS_MPROTECT, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(prot))
	if e != 0 {
		return e
	}
	return nil
}

// CurrentProtections reads the segments' protections back from /proc/self/maps. A segment
// whose pages do not all have the same protection is an error.
func (img *Image) CurrentProtections() ([]Segment, error) {
	maps, err := readMaps()
	if err != nil {
		return nil, err
	}
	var out []Segment
	for _, s := range img.Segments {
		prot, covered := -1, s.Addr
		for _, m := range maps {
			if m.hi <= s.Addr || m.lo >= s.Addr+s.Size {
				continue
			}
			if m.lo > covered {
				return nil, fmt.Errorf("%s: %#x not mapped", s.Name, covered)
			}
			if prot >= 0 && m.prot != prot {
				return nil, fmt.Errorf("%s: pages mapped %s and %s", s.Name, protString(prot), protString(m.prot))
			}
			prot, covered = m.prot, m.hi
		}
		if covered < s.Addr+s.Size {
			return nil, fmt.Errorf("%s: %#x not mapped", s.Name, covered)
		}
		out = append(out, Segment{Name: s.Name, Addr: s.Addr, Size: s.Size, Prot: prot})
	}
	return out, nil
}

type mapping struct {
	lo, hi uint64
	prot   int
}

// readMaps lists this process's mappings, in address order.
func readMaps() ([]mapping, error) {
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || len(f[1]) < 3 {
			continue
		}
		rng, perms := f[0], f[1]
		i := strings.IndexByte(rng, '-')
		if i < 0 {
			continue
		}
		lo, err1 := strconv.ParseUint(rng[:i], 16, 64)
		hi, err2 := strconv.ParseUint(rng[i+1:], 16, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("/proc/self/maps: bad line %q", sc.Text())
		}
		p := 0
		if perms[0] == 'r' {
			p |= syscall.PROT_READ
		}
		if perms[1] == 'w' {
			p |= syscall.PROT_WRITE
		}
		if perms[2] == 'x' {
			p |= syscall.PROT_EXEC
		}
		out = append(out, mapping{lo, hi, p})
	}
	return out, sc.Err()
}

// protString renders PROT_* bits as /proc/self/maps does ("r-x").
func protString(p int) string {
	b := []byte("---")
	if p&syscall.PROT_READ != 0 {
		b[0] = 'r'
	}
	if p&syscall.PROT_WRITE != 0 {
		b[1] = 'w'
	}
	if p&syscall.PROT_EXEC != 0 {
		b[2] = 'x'
	}
	return string(b)
}
