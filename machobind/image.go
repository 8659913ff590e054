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
	Style          string   // "chained", "classic" or "none"
	PointerFormats []string // chained only: the distinct DYLD_CHAINED_PTR_* formats, by segment order
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

// ErrNot64 is returned for images that are valid Mach-O but not 64-bit little-endian, which
// neither rebinding nor the pointer-table walk supports.
var ErrNot64 = errors.New("not a 64-bit little-endian Mach-O image")

// maxLoadCommandBytes bounds sizeofcmds: real images stay far below it.
const maxLoadCommandBytes = 16 << 20

// Parse reads the mach header and load commands of one image.
func Parse(src Source) (*Image, error) {
	hb, err := src.HeaderBytes(types.FileHeaderSize64)
	if err != nil {
		return nil, fmt.Errorf("reading mach header: %w", err)
	}
	magic := binary.LittleEndian.Uint32(hb)
	switch types.Magic(magic) {
	case types.Magic64:
	case types.Magic32:
		return nil, fmt.Errorf("32-bit Mach-O: %w", ErrNot64)
	default:
		if types.Magic(binary.BigEndian.Uint32(hb)) == types.Magic64 || types.Magic(binary.BigEndian.Uint32(hb)) == types.Magic32 {
			return nil, fmt.Errorf("big-endian Mach-O: %w", ErrNot64)
		}
		return nil, fmt.Errorf("bad magic %#08x: not a Mach-O image", magic)
	}
	img := &Image{src: src, pointerWidth: 8}
	if _, err := binary.Decode(hb, binary.LittleEndian, &img.Header); err != nil {
		return nil, fmt.Errorf("decoding mach header: %w", err)
	}
	h := &img.Header
	if h.SizeCommands > maxLoadCommandBytes {
		return nil, fmt.Errorf("load commands claim %d bytes, more than %d", h.SizeCommands, maxLoadCommandBytes)
	}
	all, err := src.HeaderBytes(types.FileHeaderSize64 + uint64(h.SizeCommands))
	if err != nil {
		return nil, fmt.Errorf("reading %d bytes of load commands: %w", h.SizeCommands, err)
	}
	if err := img.parseLoadCommands(all[types.FileHeaderSize64:]); err != nil {
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

func (img *Image) parseLoadCommands(cmds []byte) error {
	le := binary.LittleEndian
	off := 0
	for i := uint32(0); i < img.Header.NCommands; i++ {
		if len(cmds)-off < 8 {
			return fmt.Errorf("load command %d at offset %#x: runs past sizeofcmds", i, off+types.FileHeaderSize64)
		}
		cmd := types.LoadCmd(le.Uint32(cmds[off:]))
		size := le.Uint32(cmds[off+4:])
		if size < 8 || uint64(size) > uint64(len(cmds)-off) {
			return fmt.Errorf("load command %d (%v) at offset %#x: bad cmdsize %d", i, cmd, off+types.FileHeaderSize64, size)
		}
		body := cmds[off : off+int(size)]
		if err := img.loadCommand(cmd, body); err != nil {
			return fmt.Errorf("load command %d (%v) at offset %#x: %w", i, cmd, off+types.FileHeaderSize64, err)
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
		return img.segment(body)
	case types.LC_SEGMENT:
		return errors.New("32-bit segment in a 64-bit image")
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
	segmentCmdSize = 72
	sectionSize    = 80
)

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
	switch seg.Name {
	case "__LINKEDIT":
		img.linkedit = seg
	case "__TEXT":
		img.textVMAddr = seg.Addr
	}
	img.Segments = append(img.Segments, seg)
	return nil
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
