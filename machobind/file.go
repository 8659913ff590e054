package machobind

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/blacktop/go-macho/types"
)

// File is a Mach-O file on disk: one thin image, or the slices of a universal (fat) file.
type File struct {
	Fat    bool
	Slices []*FileSlice
	data   []byte
	unmap  func() error
}

// FileSlice is one architecture's image inside a File.
type FileSlice struct {
	Arch   string
	CPU    types.CPU
	SubCPU types.CPUSubtype
	Offset uint64 // in the file
	Size   uint64
	data   []byte
}

const (
	fatMagic      = 0xcafebabe
	fatMagic64    = 0xcafebabf
	fatArchSize   = 20
	fatArch64Size = 32
)

// Open maps a Mach-O file read-only and lists its slices. Close releases it.
func Open(path string) (*File, error) {
	data, unmap, err := mapFile(path)
	if err != nil {
		return nil, err
	}
	f, err := NewFile(data)
	if err != nil {
		unmap()
		return nil, err
	}
	f.unmap = unmap
	return f, nil
}

// Close unmaps the file; its slices and images must not be used afterwards.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap, f.data = nil, nil
	return err
}

// NewFile reads a Mach-O file held in memory.
func NewFile(data []byte) (*File, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("file of %d bytes is too short for a Mach-O header", len(data))
	}
	f := &File{data: data}
	switch binary.BigEndian.Uint32(data) {
	case fatMagic, fatMagic64:
		if err := f.readFat(); err != nil {
			return nil, err
		}
		return f, nil
	}
	if len(data) < 12 {
		return nil, fmt.Errorf("file of %d bytes is too short for a Mach-O header", len(data))
	}
	le := binary.LittleEndian
	s := &FileSlice{Size: uint64(len(data)), data: data}
	switch types.Magic(le.Uint32(data)) {
	case types.Magic64, types.Magic32:
		s.CPU, s.SubCPU = types.CPU(le.Uint32(data[4:])), types.CPUSubtype(le.Uint32(data[8:]))
	default:
		if m := types.Magic(binary.BigEndian.Uint32(data)); m == types.Magic64 || m == types.Magic32 {
			s.CPU, s.SubCPU = types.CPU(binary.BigEndian.Uint32(data[4:])), types.CPUSubtype(binary.BigEndian.Uint32(data[8:]))
		} else {
			return nil, fmt.Errorf("bad magic %#08x: not a Mach-O file", le.Uint32(data))
		}
	}
	s.Arch = ArchName(s.CPU, s.SubCPU)
	f.Slices = []*FileSlice{s}
	return f, nil
}

func (f *File) readFat() error {
	be := binary.BigEndian
	is64 := be.Uint32(f.data) == fatMagic64
	n := uint64(be.Uint32(f.data[4:]))
	entry := uint64(fatArchSize)
	if is64 {
		entry = fatArch64Size
	}
	size := uint64(len(f.data))
	if n == 0 {
		return fmt.Errorf("universal header lists no architectures")
	}
	if n > (size-8)/entry {
		return fmt.Errorf("universal header lists %d architectures but the file has room for %d", n, (size-8)/entry)
	}
	f.Fat = true
	for i := uint64(0); i < n; i++ {
		e := f.data[8+i*entry:]
		s := &FileSlice{CPU: types.CPU(be.Uint32(e)), SubCPU: types.CPUSubtype(be.Uint32(e[4:]))}
		if is64 {
			s.Offset, s.Size = be.Uint64(e[8:]), be.Uint64(e[16:])
		} else {
			s.Offset, s.Size = uint64(be.Uint32(e[8:])), uint64(be.Uint32(e[12:]))
		}
		s.Arch = ArchName(s.CPU, s.SubCPU)
		if s.Offset > size || s.Size > size-s.Offset {
			return fmt.Errorf("universal slice %d (%s) at [%#x, +%#x) points past the end of the %d-byte file", i, s.Arch, s.Offset, s.Size, size)
		}
		if s.Offset < 8+n*entry {
			return fmt.Errorf("universal slice %d (%s) at %#x overlaps the universal header", i, s.Arch, s.Offset)
		}
		s.data = f.data[s.Offset : s.Offset+s.Size]
		f.Slices = append(f.Slices, s)
	}
	return nil
}

// Arches lists the architecture names of the file's slices.
func (f *File) Arches() []string {
	var out []string
	for _, s := range f.Slices {
		out = append(out, s.Arch)
	}
	return out
}

// Slice returns the slice for an architecture name ("arm64", "x86_64", ...).
func (f *File) Slice(arch string) (*FileSlice, error) {
	for _, s := range f.Slices {
		if s.Arch == arch {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no %s slice (file has %s)", arch, strings.Join(f.Arches(), ", "))
}

// Parse parses the slice's image.
func (s *FileSlice) Parse() (img *Image, err error) {
	return Parse(fileSource(s.data))
}

// fileSource reads an image straight from its file bytes: every offset is a file offset.
type fileSource []byte

func (b fileSource) HeaderBytes(n uint64) ([]byte, error) {
	if n > uint64(len(b)) {
		return nil, fmt.Errorf("need %d bytes, the image has %d", n, len(b))
	}
	return b[:n], nil
}

func (b fileSource) LinkeditBytes(off, n uint64, _ *Segment) ([]byte, error) {
	if off > uint64(len(b)) || n > uint64(len(b))-off {
		return nil, fmt.Errorf("past the end of the %d-byte image", len(b))
	}
	return b[off : off+n], nil
}

// ArchName returns the conventional name of a CPU type and subtype ("arm64e", "x86_64h").
func ArchName(cpu types.CPU, sub types.CPUSubtype) string {
	base := sub & types.CpuSubtypeMask
	switch cpu {
	case types.CPUArm64:
		if base == types.CPUSubtypeArm64E {
			return "arm64e"
		}
		return "arm64"
	case types.CPUAmd64:
		if base == types.CPUSubtypeX86_64H {
			return "x86_64h"
		}
		return "x86_64"
	case types.CPUArm6432:
		return "arm64_32"
	case types.CPUI386:
		return "i386"
	case types.CPUArm:
		switch base { // CPU_SUBTYPE_ARM_*: the names lipo and llvm-objdump --arch use
		case 6:
			return "armv6"
		case 9:
			return "armv7"
		case 11:
			return "armv7s"
		case 12:
			return "armv7k"
		}
		return "arm"
	case types.CPUPpc:
		return "ppc"
	case types.CPUPpc64:
		return "ppc64"
	}
	return fmt.Sprintf("cpu%#x", uint32(cpu))
}
