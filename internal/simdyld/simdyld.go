// Package simdyld is a simulated dyld for tests: it maps a real Mach-O file's segments into
// this (Linux) process at a non-zero slide, applies its rebases and binds — classic dyld-info
// opcodes and chained fixups — with a unique fake address per imported symbol, and protects
// the segments as dyld leaves them (__DATA_CONST read-only). Rebinding code then runs over the
// mapping exactly as it runs over an image dyld loaded.
//
// It reads load commands with go-macho and decodes rebases, binds and chains itself, apart
// from the production parser, so that tests compare two independent readings.
package simdyld

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"syscall"

	macho "github.com/blacktop/go-macho"
	"github.com/blacktop/go-macho/types"
)

// Options selects what Load does.
type Options struct {
	Arch     string // slice of a universal file ("arm64", "x86_64"); "" for a thin file
	BindLazy bool   // bind lazy pointers too, as after their first call; else they keep the stub helper
}

// AuthInfo is how an arm64e chained pointer asks to be signed.
type AuthInfo struct {
	Key       uint8
	AddrDiv   bool
	Diversity uint16
}

// Bind is one bound pointer location.
type Bind struct {
	Addr    uint64 // slid address in this process
	Symbol  string
	Library string // install path, or this-image / main-executable / flat-namespace / weak
	Value   uint64 // fake target + addend (written unless a lazy bind was left unbound)
	Lazy    bool
	Weak    bool // weak-bind table entry (coalescing)
	Auth    *AuthInfo
}

// Segment is one mapped segment.
type Segment struct {
	Name       string
	Addr, Size uint64 // slid
	Prot       int    // PROT_* bits
}

// Image is a Mach-O image mapped by Load.
type Image struct {
	Path, Arch string
	Header     uintptr
	Slide      uintptr
	Segments   []Segment
	Binds      []Bind
	Rebases    []uint64
	mem        []byte
	base       uint64 // lowest mapped unslid vmaddr
	dylibs     []string
}

// FakeAddress is the address the simulated dyld binds an import to: unique per library and
// symbol, 16-byte aligned, in a range no real mapping uses here.
func FakeAddress(library, symbol string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(library))
	h.Write([]byte{0})
	h.Write([]byte(symbol))
	return 0x7e00_0000_0000 | (h.Sum64()&0xffff_ffff)<<4
}

// Bytes returns the live mapping: every segment but __PAGEZERO, from the lowest address.
func (img *Image) Bytes() []byte { return img.mem }

// Close unmaps the image.
func (img *Image) Close() error {
	if img.mem == nil {
		return nil
	}
	err := syscall.Munmap(img.mem)
	img.mem = nil
	return err
}

// sliceBytes returns the bytes of the wanted slice ("" for a thin file).
func sliceBytes(path, arch string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil || arch == "" {
		return data, err
	}
	ff, err := macho.NewFatFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, a := range ff.Arches {
		name := map[types.CPU]string{types.CPUArm64: "arm64", types.CPUAmd64: "x86_64"}[a.CPU]
		if name == arch {
			return data[a.Offset : a.Offset+a.Size], nil
		}
	}
	return nil, fmt.Errorf("%s: no %q slice", path, arch)
}

// Load maps a Mach-O image and applies its fixups.
func Load(path string, opt Options) (img *Image, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("simdyld %s: %v", path, r)
		}
	}()
	data, err := sliceBytes(path, opt.Arch)
	if err != nil {
		return nil, err
	}
	f, err := macho.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("go-macho: %w", err)
	}
	img = &Image{Path: path, Arch: opt.Arch, dylibs: f.ImportedLibraries()}
	segs := f.Segments()
	lo, hi := ^uint64(0), uint64(0)
	var text *macho.Segment
	for _, s := range segs {
		if s.Name == "__PAGEZERO" {
			continue
		}
		if s.Name == "__TEXT" {
			text = s
		}
		lo, hi = min(lo, s.Addr), max(hi, s.Addr+s.Memsz)
	}
	if text == nil || hi <= lo {
		return nil, errors.New("no __TEXT segment")
	}
	ps := uint64(os.Getpagesize())
	size := (hi - lo + ps - 1) &^ (ps - 1)
	mem, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, err
	}
	img.mem, img.base = mem, lo
	start := uint64(addrOf(mem))
	img.Slide = uintptr(start - lo)
	img.Header = uintptr(start + text.Addr - lo)
	for _, s := range segs {
		if s.Name == "__PAGEZERO" {
			continue
		}
		n := min(s.Filesz, s.Memsz) // Go's __DWARF has file bytes but no VM size: not mapped
		if s.Offset+n > uint64(len(data)) {
			img.Close()
			return nil, fmt.Errorf("segment %s: file range past the file", s.Name)
		}
		copy(mem[s.Addr-lo:], data[s.Offset:s.Offset+n])
	}
	if err := img.fixup(f, data, segs, opt); err != nil {
		img.Close()
		return nil, err
	}
	if err := img.protect(segs); err != nil {
		img.Close()
		return nil, err
	}
	return img, nil
}

func addrOf(b []byte) uintptr {
	return uintptr(unsafePointer(&b[0]))
}

// at returns the 8 bytes of the mapping at an unslid address.
func (img *Image) at(vmaddr uint64) ([]byte, error) {
	if vmaddr < img.base || vmaddr-img.base+8 > uint64(len(img.mem)) {
		return nil, fmt.Errorf("fixup at %#x outside the image", vmaddr)
	}
	return img.mem[vmaddr-img.base:][:8], nil
}

func (img *Image) library(ordinal int) string {
	switch ordinal {
	case 0:
		return "this-image"
	case -1:
		return "main-executable"
	case -2:
		return "flat-namespace"
	case -3:
		return "weak"
	}
	if ordinal >= 1 && ordinal <= len(img.dylibs) {
		return img.dylibs[ordinal-1]
	}
	return fmt.Sprintf("<ordinal %d>", ordinal)
}

func (img *Image) rebase(vmaddr, target uint64) error {
	b, err := img.at(vmaddr)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(b, target+uint64(img.Slide))
	img.Rebases = append(img.Rebases, vmaddr+uint64(img.Slide))
	return nil
}

func (img *Image) bind(vmaddr uint64, ordinal int, sym string, addend int64, lazy, weak, write bool, auth *AuthInfo) error {
	b, err := img.at(vmaddr)
	if err != nil {
		return err
	}
	lib := img.library(ordinal)
	v := uint64(int64(FakeAddress(lib, sym)) + addend)
	if write {
		binary.LittleEndian.PutUint64(b, v)
	}
	img.Binds = append(img.Binds, Bind{Addr: vmaddr + uint64(img.Slide), Symbol: sym, Library: lib, Value: v, Lazy: lazy, Weak: weak, Auth: auth})
	return nil
}

func (img *Image) fixup(f *macho.File, data []byte, segs macho.Segments, opt Options) error {
	for _, l := range f.Loads {
		switch c := l.(type) {
		case *macho.DyldChainedFixups:
			return img.chained(data, c.Offset, c.Size, segs)
		case *macho.DyldInfoOnly:
			return img.classic(data, &c.DyldInfoCmd, segs, opt)
		case *macho.DyldInfo:
			return img.classic(data, &c.DyldInfoCmd, segs, opt)
		}
	}
	return nil // no fixups (static or object)
}

// protect gives each segment dyld's final protection.
func (img *Image) protect(segs macho.Segments) error {
	ps := uint64(os.Getpagesize())
	for _, s := range segs {
		if s.Name == "__PAGEZERO" || s.Memsz == 0 {
			continue
		}
		prot := int(s.Prot) & 7
		if s.Name == "__DATA_CONST" || s.Name == "__AUTH_CONST" || s.Flag&0x10 != 0 { // SG_READ_ONLY
			prot = syscall.PROT_READ
		}
		off := s.Addr - img.base
		if off%ps != 0 {
			return fmt.Errorf("segment %s at %#x is not page-aligned here", s.Name, s.Addr)
		}
		n := (s.Memsz + ps - 1) &^ (ps - 1)
		if err := syscall.Mprotect(img.mem[off:off+n], prot); err != nil {
			return fmt.Errorf("mprotect %s: %w", s.Name, err)
		}
		img.Segments = append(img.Segments, Segment{Name: s.Name, Addr: s.Addr + uint64(img.Slide), Size: n, Prot: prot})
	}
	return nil
}

// CurrentProtections reads the segments' protections back from /proc/self/maps.
func (img *Image) CurrentProtections() ([]Segment, error) {
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	var out []Segment
	for _, s := range img.Segments {
		p, err := protAt(data, s.Addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		out = append(out, Segment{Name: s.Name, Addr: s.Addr, Size: s.Size, Prot: p})
	}
	return out, nil
}

func protAt(maps []byte, addr uint64) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		var lo, hi uint64
		var perms string
		line := sc.Text()
		var rng string
		if _, err := fmt.Sscan(line, &rng, &perms); err != nil {
			continue
		}
		i := bytes.IndexByte([]byte(rng), '-')
		if i < 0 {
			continue
		}
		lo, _ = strconv.ParseUint(rng[:i], 16, 64)
		hi, _ = strconv.ParseUint(rng[i+1:], 16, 64)
		if addr >= lo && addr < hi {
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
			return p, nil
		}
	}
	return 0, fmt.Errorf("%#x not mapped", addr)
}
