package machobind

import (
	"errors"
	"fmt"
	"strings"

	"github.com/blacktop/go-macho/types"
)

// Dump is what `machobind dump` reports for one file. Its JSON form is the documented schema.
type Dump struct {
	File   string      `json:"file"`
	Fat    bool        `json:"fat"`
	Slices []SliceDump `json:"slices"`
}

// SliceDump describes one architecture's image.
type SliceDump struct {
	Arch   string `json:"arch"`
	Offset uint64 `json:"offset"`
	Size   uint64 `json:"size"`
	Error  string `json:"error,omitempty"`
	// Unsupported names why a slice of an architecture machobind does not read (PowerPC) is
	// not described; such a slice is not an error when the file has others.
	Unsupported    string   `json:"unsupported,omitempty"`
	PointerWidth   int      `json:"pointer_width,omitempty"` // bytes per pointer slot: 8, or 4 (i386, arm, arm64_32)
	CPU            string   `json:"cpu,omitempty"`
	Subtype        string   `json:"subtype,omitempty"`
	Filetype       string   `json:"filetype,omitempty"`
	Flags          []string `json:"flags,omitempty"`
	Platform       string   `json:"platform,omitempty"`
	MinOS          string   `json:"minos,omitempty"`
	Fixups         string   `json:"fixups,omitempty"`
	PointerFormats []string `json:"pointer_formats,omitempty"`
	// ExternalRelocations counts the binds of a "relocations" image outside its pointer
	// tables (LC_DYSYMTAB nextrel): dyld binds them, rebinding cannot reach them.
	ExternalRelocations int           `json:"external_relocations,omitempty"`
	Dylibs              []DylibDump   `json:"dylibs"`
	Segments            []SegmentDump `json:"segments"`
	Pointers            []PointerDump `json:"pointers"`
}

// DylibDump is one dependent library.
type DylibDump struct {
	Ordinal int    `json:"ordinal"`
	Path    string `json:"path"`
	Kind    string `json:"kind"`
}

// SegmentDump is one segment and its sections.
type SegmentDump struct {
	Name     string        `json:"name"`
	VMAddr   string        `json:"vmaddr"`
	VMSize   string        `json:"vmsize"`
	FileOff  string        `json:"fileoff"`
	FileSize string        `json:"filesize"`
	MaxProt  string        `json:"maxprot"`
	InitProt string        `json:"initprot"`
	Sections []SectionDump `json:"sections"`
}

// SectionDump is one section.
type SectionDump struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	Size    string `json:"size"`
	Type    string `json:"type"`
}

// PointerDump is one symbol-pointer slot.
type PointerDump struct {
	Section string `json:"section"`
	Address string `json:"address"`
	Symbol  string `json:"symbol"`
	Library string `json:"library"`
	Kind    string `json:"kind"`
	Ordinal int    `json:"ordinal"`
	// LinkedLibrary is, for a slot bound by weak-definition coalescing (library "weak",
	// ordinal -3), where the static linker found the symbol: a dylib's path or "this-image".
	LinkedLibrary string `json:"linked_library,omitempty"`
	Weak          bool   `json:"weak,omitempty"`
	Indirect      string `json:"indirect,omitempty"` // "local" or "absolute" for slots without a symbol
	// IndirectSymbol is what the indirect symbol table names, when it differs from what dyld
	// binds there (a linker bug).
	IndirectSymbol string `json:"indirect_symbol,omitempty"`
}

// DumpOptions selects what DumpFile reports.
type DumpOptions struct {
	Arch   string // only this architecture; "" for all
	Symbol string // only this symbol's slots; "" for all (see SymbolKeys for the spelling)
}

func hex(v uint64) string { return fmt.Sprintf("%#x", v) }

// DumpFile reads a Mach-O file and describes it. A slice that cannot be read is reported with
// its error and the others still are; the returned error is non-nil when the file cannot be
// read at all or any selected slice failed.
func DumpFile(path string, opt DumpOptions) (*Dump, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return dump(path, f, opt)
}

// DumpData is DumpFile over a file's bytes held in memory.
func DumpData(name string, data []byte, opt DumpOptions) (*Dump, error) {
	f, err := NewFile(data)
	if err != nil {
		return nil, err
	}
	return dump(name, f, opt)
}

// errInternal prefixes the error of a slice whose reading panicked.
const errInternal = "internal error reading this slice"

func dump(name string, f *File, opt DumpOptions) (*Dump, error) {
	d := &Dump{File: name, Fat: f.Fat}
	slices := f.Slices
	if opt.Arch != "" {
		s, err := f.Slice(opt.Arch)
		if err != nil {
			return nil, err
		}
		slices = []*FileSlice{s}
	}
	var failed, unsupported []string
	for _, s := range slices {
		sd := dumpSlice(s, opt)
		if sd.Error != "" {
			failed = append(failed, s.Arch+": "+sd.Error)
		}
		if sd.Unsupported != "" {
			unsupported = append(unsupported, s.Arch+": "+sd.Unsupported)
		}
		d.Slices = append(d.Slices, sd)
	}
	if len(unsupported) == len(slices) {
		failed = append(failed, unsupported...) // nothing this file holds could be read
	}
	if len(failed) > 0 {
		return d, fmt.Errorf("%s", strings.Join(failed, "; "))
	}
	return d, nil
}

// dumpSlice describes one slice; a panic below it (a parser bug on hostile input) becomes the
// slice's error rather than taking the process down.
func dumpSlice(s *FileSlice, opt DumpOptions) (sd SliceDump) {
	sd = SliceDump{Arch: s.Arch, Offset: s.Offset, Size: s.Size, Dylibs: []DylibDump{}, Segments: []SegmentDump{}, Pointers: []PointerDump{}}
	defer func() {
		if r := recover(); r != nil {
			sd.Error = fmt.Sprintf("%s: %v", errInternal, r)
		}
	}()
	img, err := s.Parse()
	if errors.Is(err, ErrUnsupported) {
		sd.Unsupported = err.Error()
		return sd
	}
	if err != nil {
		sd.Error = err.Error()
		return sd
	}
	sd.PointerWidth = img.PointerWidth()
	h := img.Header
	sd.CPU, sd.Subtype = h.CPU.String(), h.SubCPU.String(h.CPU)
	if h.CPU == types.CPUI386 && h.SubCPU&types.CpuSubtypeMask == 3 {
		sd.Subtype = "i386" // CPU_SUBTYPE_I386_ALL, which go-macho spells as x86_64's ALL
	}
	sd.Filetype = strings.ToLower(h.Type.String())
	sd.Flags = h.Flags.Flags()
	sd.Platform, sd.MinOS = img.Platform, img.MinOS
	sd.Fixups, sd.PointerFormats = img.Fixups.Style, img.Fixups.PointerFormats
	sd.ExternalRelocations = img.Fixups.ExternalRelocations
	for _, dl := range img.Dylibs {
		sd.Dylibs = append(sd.Dylibs, DylibDump{Ordinal: dl.Ordinal, Path: dl.Path, Kind: dl.Kind})
	}
	for _, seg := range img.Segments {
		sg := SegmentDump{Name: seg.Name, VMAddr: hex(seg.Addr), VMSize: hex(seg.Memsz), FileOff: hex(seg.Offset),
			FileSize: hex(seg.Filesz), MaxProt: seg.Maxprot.String(), InitProt: seg.Prot.String(), Sections: []SectionDump{}}
		for _, sec := range seg.Sections {
			sg.Sections = append(sg.Sections, SectionDump{Name: sec.Name, Address: hex(sec.Addr), Size: hex(sec.Size), Type: img.sectionTypeName(sec)})
		}
		sd.Segments = append(sd.Segments, sg)
	}
	names := interner{}
	var want NameSet
	if opt.Symbol != "" {
		want = NewNameSet(opt.Symbol)
	}
	err = img.WalkSlots(func(sl *Slot, name, indirect []byte) bool {
		if want != nil {
			if _, ok := want.Lookup(name); !ok || len(name) == 0 {
				return true
			}
		}
		p := PointerDump{Section: sl.Section.FullName(), Address: hex(sl.Addr), Kind: sl.Kind.String(), Weak: sl.Weak}
		switch {
		case sl.Local && sl.Absolute:
			p.Indirect = "local-absolute"
		case sl.Local:
			p.Indirect = "local"
		case sl.Absolute:
			p.Indirect = "absolute"
		}
		if len(name) > 0 {
			p.Symbol, p.Ordinal, p.Library = names.get(name), sl.Ordinal, img.LibraryName(sl.Ordinal)
			if sl.Ordinal == WeakLookupOrdinal {
				p.LinkedLibrary = img.LibraryName(sl.LinkedOrdinal)
			}
		}
		if indirect != nil {
			p.IndirectSymbol = names.get(indirect)
		}
		sd.Pointers = append(sd.Pointers, p)
		return true
	})
	if err != nil {
		sd.Error = err.Error()
	}
	return sd
}

func (img *Image) sectionTypeName(s *Section) string {
	if k, ok := pointerKind(s); ok {
		return k.String() + "-pointers"
	}
	if k, _, ok := img.slotKind(s); ok {
		return k.String() // jump-table
	}
	names := s.Type().List()
	if len(names) == 0 {
		return "regular"
	}
	return strings.ToLower(names[0])
}
