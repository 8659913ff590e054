// Package machobind reads the import tables of Mach-O images — files on disk or images mapped in
// memory — and rebinds their imported-symbol pointer slots.
//
// One parser serves both uses: `machobind dump` runs it over a file slice and the rebinder runs
// it over an image that dyld (or the test harness) mapped, so both always agree on which slots
// a symbol has. The parser reads only through a Source, bounds-checks every count, index and
// offset against what the Source can give, and never allocates in proportion to a count it has
// not checked, so a hostile image yields an error, not a panic or a memory blow-up.
package machobind

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/blacktop/go-macho/types"
)

// Source gives the parser access to the bytes of one Mach-O image.
type Source interface {
	// HeaderBytes returns the first n bytes of the image, starting at its mach header.
	HeaderBytes(n uint64) ([]byte, error)
	// LinkeditBytes returns n bytes at file offset off, which lies in the __LINKEDIT segment
	// (linkedit is nil when the image has none, as in object files).
	LinkeditBytes(off, n uint64, linkedit *Segment) ([]byte, error)
}

// Segment is one LC_SEGMENT_64 with its sections.
type Segment struct {
	types.Segment64
	Name     string
	Sections []*Section
}

// Section is one section_64 of a segment.
type Section struct {
	types.Section64
	Name string // section name, e.g. "__got"
	Seg  string // segment name, e.g. "__DATA_CONST"
}

// FullName returns "segment,section", the way Apple's tools name a section.
func (s *Section) FullName() string { return s.Seg + "," + s.Name }

// Type returns the section type (the low byte of its flags).
func (s *Section) Type() types.SectionFlag { return s.Flags & types.SectionType }

// Dylib is one dependent library, in load-command order: its two-level-namespace ordinal is
// its index plus one.
type Dylib struct {
	Path    string
	Kind    string // "load", "weak", "reexport", "lazy", "upward"
	Ordinal int
}

// Fixups names how dyld binds and rebases an image.
type Fixups struct {
	// Style is "chained" (LC_DYLD_CHAINED_FIXUPS), "classic" (LC_DYLD_INFO opcodes),
	// "relocations" (neither, in a dyld-linked image: Mac OS X 10.5 and older binaries, bound
	// from the indirect symbol table and external relocations) or "none" (objects, dSYMs,
	// static images).
	Style          string
	PointerFormats []string // chained only: the distinct DYLD_CHAINED_PTR_* formats, by segment order
	// ExternalRelocations and LocalRelocations count LC_DYSYMTAB's relocation entries in a
	// "relocations" image: external ones bind data outside the pointer tables (not slots).
	ExternalRelocations, LocalRelocations int
}

// Image is the parsed load-command view of one 64-bit Mach-O image.
type Image struct {
	Header   types.FileHeader
	Segments []*Segment
	Dylibs   []Dylib
	Platform string // from LC_BUILD_VERSION or LC_VERSION_MIN_*; "" if none
	MinOS    string
	Fixups   Fixups

	src          Source
	linkedit     *Segment
	symtab       *types.SymtabCmd
	dysymtab     *types.DysymtabCmd
	chainedOff   uint64
	chainedSize  uint64
	hasChained   bool
	hasDyldInfo  bool
	dyldInfo     *types.DyldInfoCmd
	textVMAddr   uint64
	pointerWidth uint64
}

// ErrNot64 is returned by ParseLoaded for images that are valid Mach-O but not 64-bit
// little-endian: rebinding supports only those (Parse reads 32-bit images for dump).
var ErrNot64 = errors.New("not a 64-bit little-endian Mach-O image")

// ErrUnsupported is returned for Mach-O images of architectures machobind does not read:
// big-endian ones (PowerPC).
var ErrUnsupported = errors.New("architecture not read by machobind")

// maxLoadCommandBytes bounds sizeofcmds: real images stay far below it.
const maxLoadCommandBytes = 16 << 20

// fileHeaderSize32 is the size of a 32-bit mach_header (no reserved word).
const fileHeaderSize32 = 28

// Is64 reports whether the image is a 64-bit one (8-byte pointer slots); 32-bit images
// (i386, armv7, arm64_32) have 4-byte slots and are read but never rebound.
func (img *Image) Is64() bool { return img.pointerWidth == 8 }

// PointerWidth is the size of the image's pointer slots in bytes: 8, or 4 for 32-bit images.
func (img *Image) PointerWidth() int { return int(img.pointerWidth) }

// Parse reads the mach header and load commands of one image, 64-bit or 32-bit
// little-endian.
func Parse(src Source) (*Image, error) {
	hb, err := src.HeaderBytes(fileHeaderSize32)
	if err != nil {
		return nil, fmt.Errorf("reading mach header: %w", err)
	}
	magic := binary.LittleEndian.Uint32(hb)
	img := &Image{src: src, pointerWidth: 8}
	hsize := uint64(types.FileHeaderSize64)
	switch types.Magic(magic) {
	case types.Magic64:
		if hb, err = src.HeaderBytes(types.FileHeaderSize64); err != nil {
			return nil, fmt.Errorf("reading mach header: %w", err)
		}
		if _, err := binary.Decode(hb, binary.LittleEndian, &img.Header); err != nil {
			return nil, fmt.Errorf("decoding mach header: %w", err)
		}
	case types.Magic32:
		img.pointerWidth, hsize = 4, fileHeaderSize32
		le := binary.LittleEndian
		img.Header = types.FileHeader{Magic: types.Magic32, CPU: types.CPU(le.Uint32(hb[4:])), SubCPU: types.CPUSubtype(le.Uint32(hb[8:])),
			Type: types.HeaderFileType(le.Uint32(hb[12:])), NCommands: le.Uint32(hb[16:]), SizeCommands: le.Uint32(hb[20:]),
			Flags: types.HeaderFlag(le.Uint32(hb[24:]))}
	default:
		if m := types.Magic(binary.BigEndian.Uint32(hb)); m == types.Magic64 || m == types.Magic32 {
			cpu := types.CPU(binary.BigEndian.Uint32(hb[4:]))
			return nil, fmt.Errorf("big-endian %s Mach-O: %w (it reads x86_64, arm64, arm64e, arm64_32, i386 and arm)", ArchName(cpu, 0), ErrUnsupported)
		}
		return nil, fmt.Errorf("bad magic %#08x: not a Mach-O image", magic)
	}
	h := &img.Header
	if h.SizeCommands > maxLoadCommandBytes {
		return nil, fmt.Errorf("load commands claim %d bytes, more than %d", h.SizeCommands, maxLoadCommandBytes)
	}
	all, err := src.HeaderBytes(hsize + uint64(h.SizeCommands))
	if err != nil {
		return nil, fmt.Errorf("reading %d bytes of load commands: %w", h.SizeCommands, err)
	}
	if err := img.parseLoadCommands(all[hsize:], hsize); err != nil {
		return nil, err
	}
	if err := img.parseFixups(); err != nil {
		return nil, err
	}
	return img, nil
}

func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func (img *Image) parseLoadCommands(cmds []byte, hsize uint64) error {
	le := binary.LittleEndian
	off := 0
	for i := uint32(0); i < img.Header.NCommands; i++ {
		if len(cmds)-off < 8 {
			return fmt.Errorf("load command %d at offset %#x: runs past sizeofcmds", i, uint64(off)+hsize)
		}
		cmd := types.LoadCmd(le.Uint32(cmds[off:]))
		size := le.Uint32(cmds[off+4:])
		if size < 8 || uint64(size) > uint64(len(cmds)-off) {
			return fmt.Errorf("load command %d (%v) at offset %#x: bad cmdsize %d", i, cmd, uint64(off)+hsize, size)
		}
		body := cmds[off : off+int(size)]
		if err := img.loadCommand(cmd, body); err != nil {
			return fmt.Errorf("load command %d (%v) at offset %#x: %w", i, cmd, uint64(off)+hsize, err)
		}
		off += int(size)
	}
	return nil
}

// decode fills v from the start of b, failing when b is too short.
func decode(b []byte, v any) error {
	if _, err := binary.Decode(b, binary.LittleEndian, v); err != nil {
		return fmt.Errorf("command too short for %T", v)
	}
	return nil
}

func (img *Image) loadCommand(cmd types.LoadCmd, body []byte) error {
	switch cmd {
	case types.LC_SEGMENT_64:
		if !img.Is64() {
			return errors.New("64-bit segment in a 32-bit image")
		}
		return img.segment(body)
	case types.LC_SEGMENT:
		if img.Is64() {
			return errors.New("32-bit segment in a 64-bit image")
		}
		return img.segment32(body)
	case types.LC_SYMTAB:
		img.symtab = new(types.SymtabCmd)
		return decode(body, img.symtab)
	case types.LC_DYSYMTAB:
		img.dysymtab = new(types.DysymtabCmd)
		return decode(body, img.dysymtab)
	case types.LC_LOAD_DYLIB, types.LC_LOAD_WEAK_DYLIB, types.LC_REEXPORT_DYLIB, types.LC_LAZY_LOAD_DYLIB, types.LC_LOAD_UPWARD_DYLIB:
		var d types.DylibCmd
		if err := decode(body, &d); err != nil {
			return err
		}
		if d.NameOffset < 24 || uint64(d.NameOffset) >= uint64(len(body)) {
			return fmt.Errorf("dylib name offset %d outside command of %d bytes", d.NameOffset, len(body))
		}
		kind := map[types.LoadCmd]string{
			types.LC_LOAD_DYLIB: "load", types.LC_LOAD_WEAK_DYLIB: "weak", types.LC_REEXPORT_DYLIB: "reexport",
			types.LC_LAZY_LOAD_DYLIB: "lazy", types.LC_LOAD_UPWARD_DYLIB: "upward",
		}[cmd]
		img.Dylibs = append(img.Dylibs, Dylib{Path: cstring(body[d.NameOffset:]), Kind: kind, Ordinal: len(img.Dylibs) + 1})
	case types.LC_DYLD_CHAINED_FIXUPS:
		var c types.LinkEditDataCmd
		if err := decode(body, &c); err != nil {
			return err
		}
		img.hasChained, img.chainedOff, img.chainedSize = true, uint64(c.Offset), uint64(c.Size)
	case types.LC_DYLD_INFO, types.LC_DYLD_INFO_ONLY:
		img.hasDyldInfo = true
		img.dyldInfo = new(types.DyldInfoCmd)
		return decode(body, img.dyldInfo)
	case types.LC_BUILD_VERSION:
		var b types.BuildVersionCmd
		if err := decode(body, &b); err != nil {
			return err
		}
		img.Platform, img.MinOS = b.Platform.String(), b.Minos.String()
	case types.LC_VERSION_MIN_MACOSX, types.LC_VERSION_MIN_IPHONEOS, types.LC_VERSION_MIN_TVOS, types.LC_VERSION_MIN_WATCHOS:
		var v types.VersionMinCmd
		if err := decode(body, &v); err != nil {
			return err
		}
		img.Platform = map[types.LoadCmd]string{
			types.LC_VERSION_MIN_MACOSX: types.Platform_macOS.String(), types.LC_VERSION_MIN_IPHONEOS: types.Platform_iOS.String(),
			types.LC_VERSION_MIN_TVOS: types.Platform_tvOS.String(), types.LC_VERSION_MIN_WATCHOS: types.Platform_watchOS.String(),
		}[cmd]
		img.MinOS = v.Version.String()
	}
	return nil
}

const (
	segmentCmdSize   = 72
	sectionSize      = 80
	segmentCmdSize32 = 56
	sectionSize32    = 68
)

// segment32 reads an LC_SEGMENT into the 64-bit structures (every field widened).
func (img *Image) segment32(body []byte) error {
	if len(body) < segmentCmdSize32 {
		return fmt.Errorf("command too short for a 32-bit segment")
	}
	le := binary.LittleEndian
	seg := &Segment{}
	sg := &seg.Segment64
	sg.LoadCmd, sg.Len = types.LC_SEGMENT, le.Uint32(body[4:])
	copy(sg.Name[:], body[8:24])
	sg.Addr, sg.Memsz, sg.Offset, sg.Filesz = uint64(le.Uint32(body[24:])), uint64(le.Uint32(body[28:])), uint64(le.Uint32(body[32:])), uint64(le.Uint32(body[36:]))
	sg.Maxprot, sg.Prot = types.VmProtection(le.Uint32(body[40:])), types.VmProtection(le.Uint32(body[44:]))
	sg.Nsect, sg.Flag = le.Uint32(body[48:]), types.SegFlag(le.Uint32(body[52:]))
	seg.Name = cstring(sg.Name[:])
	if uint64(sg.Nsect) > uint64(len(body)-segmentCmdSize32)/sectionSize32 {
		return fmt.Errorf("segment %s claims %d sections but its command holds %d bytes", seg.Name, sg.Nsect, len(body))
	}
	for j := 0; j < int(sg.Nsect); j++ {
		b := body[segmentCmdSize32+j*sectionSize32:]
		s := &Section{}
		sc := &s.Section64
		copy(sc.Name[:], b[0:16])
		copy(sc.Seg[:], b[16:32])
		sc.Addr, sc.Size = uint64(le.Uint32(b[32:])), uint64(le.Uint32(b[36:]))
		sc.Offset, sc.Align, sc.Reloff, sc.Nreloc = le.Uint32(b[40:]), le.Uint32(b[44:]), le.Uint32(b[48:]), le.Uint32(b[52:])
		sc.Flags, sc.Reserve1, sc.Reserve2 = types.SectionFlag(le.Uint32(b[56:])), le.Uint32(b[60:]), le.Uint32(b[64:])
		s.Name, s.Seg = cstring(sc.Name[:]), cstring(sc.Seg[:])
		seg.Sections = append(seg.Sections, s)
	}
	img.addSegment(seg)
	return nil
}

func (img *Image) segment(body []byte) error {
	seg := &Segment{}
	if err := decode(body, &seg.Segment64); err != nil {
		return err
	}
	seg.Name = cstring(seg.Segment64.Name[:])
	if uint64(seg.Nsect) > uint64(len(body)-segmentCmdSize)/sectionSize {
		return fmt.Errorf("segment %s claims %d sections but its command holds %d bytes", seg.Name, seg.Nsect, len(body))
	}
	for j := 0; j < int(seg.Nsect); j++ {
		s := &Section{}
		if err := decode(body[segmentCmdSize+j*sectionSize:], &s.Section64); err != nil {
			return err
		}
		s.Name, s.Seg = cstring(s.Section64.Name[:]), cstring(s.Section64.Seg[:])
		seg.Sections = append(seg.Sections, s)
	}
	img.addSegment(seg)
	return nil
}

func (img *Image) addSegment(seg *Segment) {
	switch seg.Name {
	case "__LINKEDIT":
		img.linkedit = seg
	case "__TEXT":
		img.textVMAddr = seg.Addr
	}
	img.Segments = append(img.Segments, seg)
}

// TextVMAddr returns the unslid address of __TEXT, where the mach header is mapped.
func (img *Image) TextVMAddr() uint64 { return img.textVMAddr }

// Sections returns every section of every segment, in load-command order.
func (img *Image) Sections() []*Section {
	var out []*Section
	for _, seg := range img.Segments {
		out = append(out, seg.Sections...)
	}
	return out
}

// Linkedit returns the image's __LINKEDIT segment, or nil.
func (img *Image) Linkedit() *Segment { return img.linkedit }

// linkeditBytes reads n bytes at file offset off through the Source, after checking that the
// range lies inside __LINKEDIT's file range when the image has one.
func (img *Image) linkeditBytes(what string, off, n uint64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	if le := img.linkedit; le != nil {
		if off < le.Offset || off-le.Offset > le.Filesz || n > le.Filesz-(off-le.Offset) {
			return nil, fmt.Errorf("%s [%#x, +%#x) lies outside __LINKEDIT [%#x, +%#x)", what, off, n, le.Offset, le.Filesz)
		}
	}
	b, err := img.src.LinkeditBytes(off, n, img.linkedit)
	if err != nil {
		return nil, fmt.Errorf("%s [%#x, +%#x): %w", what, off, n, err)
	}
	return b, nil
}
