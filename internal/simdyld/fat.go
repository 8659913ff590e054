//go:build linux

package simdyld

// Universal (fat) files: the wanted architecture's slice, and architecture names.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// archName names a CPU type and subtype as Apple's tools do.
func archName(cpu, sub uint32) string {
	sub &= 0x00ff_ffff // capability bits (arm64e ABI version) are not part of the name
	switch cpu {
	case 0x0100_000c: // CPU_TYPE_ARM64
		if sub == 2 {
			return "arm64e"
		}
		return "arm64"
	case 0x0100_0007: // CPU_TYPE_X86_64
		if sub == 8 {
			return "x86_64h"
		}
		return "x86_64"
	case 0x0200_000c:
		return "arm64_32"
	case 12:
		return "arm"
	case 7:
		return "i386"
	}
	return fmt.Sprintf("cpu%#x", cpu)
}

// slice returns the bytes of the wanted slice and its architecture name.
func slice(data []byte, arch string) ([]byte, string, error) {
	if len(data) < 8 {
		return nil, "", errors.New("too short for a Mach-O file")
	}
	be := binary.BigEndian
	magic := be.Uint32(data)
	if magic != 0xcafebabe && magic != 0xcafebabf {
		if len(data) < 12 {
			return nil, "", errors.New("too short for a Mach-O header")
		}
		le := binary.LittleEndian
		name := archName(le.Uint32(data[4:]), le.Uint32(data[8:]))
		if arch != "" && arch != name {
			return nil, "", fmt.Errorf("thin %s file has no %q slice", name, arch)
		}
		return data, name, nil
	}
	n := uint64(be.Uint32(data[4:]))
	width := uint64(20)
	if magic == 0xcafebabf {
		width = 32
	}
	if 8+n*width > uint64(len(data)) {
		return nil, "", fmt.Errorf("universal header of %d slices past the file", n)
	}
	var names []string
	type sl struct{ off, size uint64 }
	found := map[string]sl{}
	for i := uint64(0); i < n; i++ {
		e := data[8+i*width:]
		var s sl
		if width == 20 {
			s = sl{uint64(be.Uint32(e[8:])), uint64(be.Uint32(e[12:]))}
		} else {
			s = sl{be.Uint64(e[8:]), be.Uint64(e[16:])}
		}
		name := archName(be.Uint32(e), be.Uint32(e[4:]))
		if s.off > uint64(len(data)) || s.size > uint64(len(data))-s.off {
			return nil, "", fmt.Errorf("%s slice [%#x,+%#x) past the file", name, s.off, s.size)
		}
		names = append(names, name)
		found[name] = s
	}
	if arch == "" {
		if len(names) != 1 {
			return nil, "", fmt.Errorf("universal file of %d slices (%s): Options.Arch must name one", len(names), strings.Join(names, ", "))
		}
		arch = names[0]
	}
	s, ok := found[arch]
	if !ok {
		return nil, "", fmt.Errorf("universal file has no %q slice (has %s)", arch, strings.Join(names, ", "))
	}
	return data[s.off : s.off+s.size], arch, nil
}
