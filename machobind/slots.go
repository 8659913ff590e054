package machobind

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	"github.com/blacktop/go-macho/pkg/fixupchains"
	"github.com/blacktop/go-macho/types"
)

// Kind says how dyld fills a pointer-table slot.
type Kind uint8

// Slot kinds.
const (
	KindNonLazy   Kind = iota // S_NON_LAZY_SYMBOL_POINTERS (__got, __nl_symbol_ptr): bound at load
	KindLazy                  // S_LAZY_SYMBOL_POINTERS (__la_symbol_ptr): bound on first call
	KindAuth                  // non-lazy, signed on arm64e (__auth_got)
	KindTLV                   // S_THREAD_LOCAL_VARIABLE_POINTERS (__thread_ptrs)
	KindLazyDylib             // S_LAZY_DYLIB_SYMBOL_POINTERS
	// KindJumpTable is an entry of i386's __IMPORT,__jump_table (S_SYMBOL_STUBS with
	// S_ATTR_SELF_MODIFYING_CODE): a 5-byte jump that dyld rewrites, in 32-bit images only.
	KindJumpTable
)

func (k Kind) String() string {
	switch k {
	case KindNonLazy:
		return "non-lazy"
	case KindLazy:
		return "lazy"
	case KindAuth:
		return "auth"
	case KindTLV:
		return "tlv"
	case KindLazyDylib:
		return "lazy-dylib"
	case KindJumpTable:
		return "jump-table"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Special library ordinals, with dyld's BIND_SPECIAL_DYLIB_* values (the symbol table's
// n_desc spells the second and third 0xff and 0xfe; they are normalised to these).
const (
	SelfLibraryOrdinal    = 0
	MainExecutableOrdinal = -1
	FlatLookupOrdinal     = -2
	WeakLookupOrdinal     = -3
	nWeakRef              = 0x0040
	nWeakDef              = 0x0080 // N_WEAK_DEF on a definition, N_REF_TO_WEAK on a reference
	indirectSymbolLocal   = types.INDIRECT_SYMBOL_LOCAL
	indirectSymbolAbs     = types.INDIRECT_SYMBOL_ABS
	nlistSize             = 16
	nlistSize32           = 12
	selfModifyingCode     = 0x04000000 // S_ATTR_SELF_MODIFYING_CODE
	indirectEntrySize     = 4
	chainedHeaderSize     = 28
	chainedSegStartsFixed = 22
)

// Slot is one pointer in a symbol-pointer section.
type Slot struct {
	Section *Section
	Index   int    // index of the slot inside its section
	Addr    uint64 // unslid address of the slot
	Kind    Kind
	// Indirect is the raw indirect-symbol-table entry; Local and Absolute are its flags for
	// slots that point into the image itself (such a slot has no Symbol unless bind opcodes
	// bind it anyway).
	Indirect uint32
	Local    bool
	Absolute bool
	// Symbol is the imported symbol's name as the symbol table spells it ("_objc_msgSend"):
	// for classic images, the symbol dyld's bind opcodes bind there.
	Symbol string
	// IndirectSymbol is set (by Slots) when the indirect symbol table names another symbol
	// than the bind opcodes do for this slot — a linker bug seen in zig's TLV pointers.
	IndirectSymbol string
	// Ordinal is the library ordinal dyld binds the slot with; Library the dylib it names
	// (LibraryName). WeakLookupOrdinal marks weak-definition coalescing (C++ operator new,
	// typeinfo, inline functions): dyld binds the slot to the first definition among the
	// images with weak definitions in load order, the main executable first, a non-weak
	// definition winning over weak ones; LinkedOrdinal then says where the static linker found
	// the symbol (the symbol table's ordinal, or a classic image's regular bind at the slot).
	Ordinal       int
	Library       string
	LinkedOrdinal int
	LinkedLibrary string
	Weak          bool // weak import (N_WEAK_REF): may be unbound at run time
}

// LibraryName names a library ordinal the way llvm-objdump does for the special ones.
func (img *Image) LibraryName(ordinal int) string {
	switch ordinal {
	case SelfLibraryOrdinal:
		return "this-image"
	case FlatLookupOrdinal:
		return "flat-namespace"
	case MainExecutableOrdinal:
		return "main-executable"
	case WeakLookupOrdinal:
		return "weak"
	}
	if ordinal >= 1 && ordinal <= len(img.Dylibs) {
		return img.Dylibs[ordinal-1].Path
	}
	return fmt.Sprintf("<bad ordinal %d>", ordinal)
}

// pointerKind returns the slot kind of a section, and false when it holds no symbol pointers.
func pointerKind(s *Section) (Kind, bool) {
	switch s.Type() {
	case types.NonLazySymbolPointers:
		if strings.HasPrefix(s.Name, "__auth") {
			return KindAuth, true
		}
		return KindNonLazy, true
	case types.LazySymbolPointers:
		return KindLazy, true
	case types.ThreadLocalVariablePointers:
		return KindTLV, true
	case types.LazyDylibSymbolPointers:
		return KindLazyDylib, true
	}
	return 0, false
}

// slotKind returns the slot kind of a section of this image and the size of its entries, and
// false when it holds no slots: the pointer sections, and in 32-bit images the
// self-modifying jump tables.
func (img *Image) slotKind(s *Section) (Kind, uint64, bool) {
	if k, ok := pointerKind(s); ok {
		return k, img.pointerWidth, true
	}
	if !img.Is64() && s.Type() == types.SymbolStubs && s.Flags&selfModifyingCode != 0 && s.Reserve2 > 0 {
		return KindJumpTable, uint64(s.Reserve2), true
	}
	return 0, 0, false
}

// SlotVisitor receives each slot during WalkSlots. name (what is bound there) and indirect
// (what the indirect symbol table says, when that differs) alias the image's __LINKEDIT and
// are only valid during the call; s.Symbol is left empty so that no string is built per slot.
// Returning false stops the walk.
type SlotVisitor func(s *Slot, name, indirect []byte) bool

// WalkSlots visits every slot of every symbol-pointer section, in section order. It validates
// the whole indirect range of a section before visiting any slot of it.
func (img *Image) WalkSlots(visit SlotVisitor) error {
	var ptrSecs []*Section
	for _, s := range img.Sections() {
		if _, _, ok := img.slotKind(s); ok {
			ptrSecs = append(ptrSecs, s)
		}
	}
	if len(ptrSecs) == 0 || img.Header.Type == types.MH_DSYM {
		return nil // a dSYM's sections are headers without contents
	}
	if img.symtab == nil || img.dysymtab == nil {
		return fmt.Errorf("image has symbol-pointer sections but no LC_SYMTAB/LC_DYSYMTAB")
	}
	st, dy := img.symtab, img.dysymtab
	if err := img.checkDysymtab(); err != nil {
		return err
	}
	indirect, err := img.linkeditBytes("indirect symbol table", uint64(dy.Indirectsymoff), uint64(dy.Nindirectsyms)*indirectEntrySize)
	if err != nil {
		return err
	}
	nlsize := uint64(nlistSize)
	if !img.Is64() {
		nlsize = nlistSize32
	}
	syms, err := img.linkeditBytes("symbol table", uint64(st.Symoff), uint64(st.Nsyms)*nlsize)
	if err != nil {
		return err
	}
	strtab, err := img.linkeditBytes("string table", uint64(st.Stroff), uint64(st.Strsize))
	if err != nil {
		return err
	}
	// Real images give each pointer section its own range of the indirect table; a hostile one
	// could point many sections at the same entries, so the walk is bounded by the table.
	var total uint64
	for _, sec := range ptrSecs {
		_, stride, _ := img.slotKind(sec)
		total += sec.Size / stride
		if total > uint64(dy.Nindirectsyms) {
			return fmt.Errorf("pointer sections claim more slots than the %d indirect symbols", dy.Nindirectsyms)
		}
	}
	byAddr := append([]*Section(nil), ptrSecs...)
	sort.Slice(byAddr, func(a, b int) bool { return byAddr[a].Addr < byAddr[b].Addr })
	binds, err := img.classicBinds(func(addr uint64) bool {
		i := sort.Search(len(byAddr), func(i int) bool { return byAddr[i].Addr+byAddr[i].Size > addr })
		// sections may overlap in hostile images; the first ending past addr decides
		return i < len(byAddr) && addr >= byAddr[i].Addr
	})
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	twoLevel := img.Header.Flags&types.TwoLevel != 0
	// dyld coalesces weak definitions of images that have or bind to them
	coalesces := img.Header.Flags&(types.WeakDefines|types.BindsToWeak) != 0
	// chained fixups: the import table says which imports dyld binds by a weak or flat
	// lookup (ld64 and ld-prime do not always mark such references N_REF_TO_WEAK)
	var chainedSpecial map[string]int
	chainedRead := false
	if binds == nil && img.hasChained {
		chainedSpecial, chainedRead = img.chainedSpecialImports()
	}
	var slot Slot
	for _, sec := range ptrSecs {
		kind, stride, _ := img.slotKind(sec)
		n := sec.Size / stride
		first := uint64(sec.Reserve1)
		if first > uint64(dy.Nindirectsyms) || n > uint64(dy.Nindirectsyms)-first {
			return fmt.Errorf("section %s: slots [%d, +%d) run past the %d indirect symbols", sec.FullName(), first, n, dy.Nindirectsyms)
		}
		for i := uint64(0); i < n; i++ {
			ind := le.Uint32(indirect[(first+i)*indirectEntrySize:])
			slot = Slot{Section: sec, Index: int(i), Addr: sec.Addr + i*stride, Kind: kind, Indirect: ind}
			var name []byte
			if ind&(indirectSymbolLocal|indirectSymbolAbs) != 0 {
				slot.Local = ind&indirectSymbolLocal != 0
				slot.Absolute = ind&indirectSymbolAbs != 0
			} else {
				if uint64(ind) >= uint64(st.Nsyms) {
					return fmt.Errorf("section %s slot %d: symbol index %d out of range (%d symbols)", sec.FullName(), i, ind, st.Nsyms)
				}
				nl := syms[uint64(ind)*nlsize:]
				strx := le.Uint32(nl)
				desc := types.NDescType(le.Uint16(nl[6:]))
				if uint64(strx) >= uint64(len(strtab)) {
					return fmt.Errorf("section %s slot %d: symbol %d name offset %#x past the %d-byte string table", sec.FullName(), i, ind, strx, len(strtab))
				}
				name = strtab[strx:min(uint64(len(strtab)), uint64(strx)+maxSymbolName+1)]
				z := bytes.IndexByte(name, 0)
				if z < 0 {
					return fmt.Errorf("section %s slot %d: symbol %d name at %#x is not terminated within %d bytes", sec.FullName(), i, ind, strx, maxSymbolName)
				}
				name = name[:z]
				ntype := nl[4]
				undefined := ntype&0x0e == 0 // N_UNDF (N_PBUD counts as defined here)
				switch o := desc.GetLibraryOrdinal(); {
				case undefined && !twoLevel:
					slot.Ordinal = FlatLookupOrdinal // flat namespace (and objects): no ordinal
				case !undefined:
					slot.Ordinal = SelfLibraryOrdinal
				case o == 0xff:
					slot.Ordinal = MainExecutableOrdinal
				case o == 0xfe:
					slot.Ordinal = FlatLookupOrdinal
				default:
					slot.Ordinal = int(o)
				}
				slot.Weak = undefined && desc&nWeakRef != 0
				if o, ok := chainedSpecial[string(name)]; ok && undefined && o != ambiguousOrdinal {
					// an import of a special ordinal in the chained import table
					if o == WeakLookupOrdinal {
						slot.LinkedOrdinal = slot.Ordinal
					}
					slot.Ordinal = o
				} else if chainedRead && undefined {
					// the import table has it with a regular ordinal (the symbol table's)
				} else if binds == nil && desc&nWeakDef != 0 && (undefined || ntype&0x01 != 0) && coalesces {
					// no bind opcodes (chained fixups, or an old image dyld binds from the
					// symbol table): a reference to a weak definition, or the image's own
					// exported weak definition, is bound by coalescing, as the chained import's
					// BIND_SPECIAL_DYLIB_WEAK_LOOKUP ordinal says
					slot.LinkedOrdinal, slot.Ordinal = slot.Ordinal, WeakLookupOrdinal
				}
			}
			var indirectName []byte
			if b, ok := binds[slot.Addr]; ok {
				if !bytes.Equal(b.name, name) {
					indirectName = name
				}
				linkedFromSymtab := slot.Ordinal
				name, slot.Ordinal, slot.Weak = b.name, b.ordinal, b.weak
				if b.ordinal == WeakLookupOrdinal {
					slot.LinkedOrdinal = b.linked
					if b.linked == noLinkedOrdinal {
						slot.LinkedOrdinal = linkedFromSymtab
					}
				}
			}
			if !visit(&slot, name, indirectName) {
				return nil
			}
		}
	}
	return nil
}

// checkDysymtab checks that LC_DYSYMTAB's three symbol groups (locals, defined externals,
// undefined) lie inside LC_SYMTAB's symbols, as dyld, llvm-objdump and Go's debug/macho
// require: a file that breaks this is malformed, and which slot a symbol index names cannot
// be trusted.
func (img *Image) checkDysymtab() error {
	st, dy := img.symtab, img.dysymtab
	if st == nil || dy == nil {
		return nil
	}
	for _, g := range []struct {
		what    string
		i, n    uint32
		iname   string
		nameOfN string
	}{
		{"local", dy.Ilocalsym, dy.Nlocalsym, "ilocalsym", "nlocalsym"},
		{"defined external", dy.Iextdefsym, dy.Nextdefsym, "iextdefsym", "nextdefsym"},
		{"undefined", dy.Iundefsym, dy.Nundefsym, "iundefsym", "nundefsym"},
	} {
		if uint64(g.i)+uint64(g.n) > uint64(st.Nsyms) {
			return fmt.Errorf("malformed LC_DYSYMTAB: %s symbols %s %d + %s %d extend past the %d symbols of LC_SYMTAB",
				g.what, g.iname, g.i, g.nameOfN, g.n, st.Nsyms)
		}
	}
	return nil
}

// maxSymbolName bounds the length of a symbol name: a name is scanned and copied at most this
// far, so a string table without terminators costs linear time and memory, not quadratic.
const maxSymbolName = 4096

// interner turns names into strings once per distinct name, so that many slots naming the
// same (possibly long) symbol share one copy.
type interner map[string]string

func (in interner) get(b []byte) string {
	if s, ok := in[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	in[s] = s
	return s
}

// Slots returns every slot with Symbol and Library filled in.
func (img *Image) Slots() ([]Slot, error) {
	var out []Slot
	names := interner{}
	err := img.WalkSlots(func(s *Slot, name, indirect []byte) bool {
		c := *s
		if len(name) > 0 {
			c.Symbol = names.get(name)
			c.Library = img.LibraryName(c.Ordinal)
			if c.Ordinal == WeakLookupOrdinal {
				c.LinkedLibrary = img.LibraryName(c.LinkedOrdinal)
			}
		}
		if indirect != nil {
			c.IndirectSymbol = names.get(indirect)
		}
		out = append(out, c)
		return true
	})
	return out, err
}

// parseFixups decides the fixup style and, for chained fixups, reads the pointer format of
// each segment from the dyld_chained_starts_in_image table.
func (img *Image) parseFixups() error {
	switch {
	case img.hasChained:
		img.Fixups.Style = "chained"
	case img.hasDyldInfo:
		img.Fixups.Style = "classic"
		return nil
	case img.Header.Flags&types.DyldLink != 0 && img.Header.Type != types.MH_OBJECT:
		// Mac OS X 10.5 and older: dyld binds the pointer tables from the indirect symbol
		// table and the symbols' library ordinals, and everything else through LC_DYSYMTAB's
		// external relocations; local relocations rebase
		img.Fixups.Style = "relocations"
		if dy := img.dysymtab; dy != nil {
			img.Fixups.ExternalRelocations, img.Fixups.LocalRelocations = int(dy.Nextrel), int(dy.Nlocrel)
		}
		return nil
	default:
		img.Fixups.Style = "none"
		return nil
	}
	formats, err := img.ChainedFormats()
	if err != nil {
		return err
	}
	seen := map[fixupchains.DCPtrKind]bool{}
	for _, f := range formats {
		if f != 0 && !seen[f] {
			seen[f] = true
			img.Fixups.PointerFormats = append(img.Fixups.PointerFormats, f.String())
		}
	}
	return nil
}

// ChainedFixupsData returns the LC_DYLD_CHAINED_FIXUPS payload, or nil when there is none.
func (img *Image) ChainedFixupsData() ([]byte, error) {
	if !img.hasChained {
		return nil, nil
	}
	return img.linkeditBytes("chained fixups", img.chainedOff, img.chainedSize)
}

// ChainedFormats returns the pointer format of each segment, indexed like Segments (0 where a
// segment has no chains).
func (img *Image) ChainedFormats() ([]fixupchains.DCPtrKind, error) {
	data, err := img.ChainedFixupsData()
	if err != nil || data == nil {
		return nil, err
	}
	var hdr fixupchains.DyldChainedFixupsHeader
	if len(data) < chainedHeaderSize {
		return nil, fmt.Errorf("chained fixups: %d bytes, too short for the header", len(data))
	}
	if _, err := binary.Decode(data, binary.LittleEndian, &hdr); err != nil {
		return nil, fmt.Errorf("chained fixups header: %w", err)
	}
	if hdr.FixupsVersion != 0 {
		return nil, fmt.Errorf("chained fixups: unknown version %d", hdr.FixupsVersion)
	}
	le := binary.LittleEndian
	so := uint64(hdr.StartsOffset)
	if so+4 > uint64(len(data)) {
		return nil, fmt.Errorf("chained fixups: starts offset %#x past the %d-byte payload", so, len(data))
	}
	segCount := uint64(le.Uint32(data[so:]))
	if segCount > (uint64(len(data))-so-4)/4 {
		return nil, fmt.Errorf("chained fixups: %d segments do not fit the payload", segCount)
	}
	out := make([]fixupchains.DCPtrKind, len(img.Segments))
	for i := uint64(0); i < segCount; i++ {
		segOff := uint64(le.Uint32(data[so+4+4*i:]))
		if segOff == 0 {
			continue
		}
		at := so + segOff
		if at+chainedSegStartsFixed > uint64(len(data)) {
			return nil, fmt.Errorf("chained fixups: segment %d starts at %#x, past the payload", i, at)
		}
		if i < uint64(len(out)) {
			out[i] = fixupchains.DCPtrKind(le.Uint16(data[at+6:]))
		}
	}
	return out, nil
}

// chainedSpecialImports reads the import table of LC_DYLD_CHAINED_FIXUPS and returns the
// imports bound through a special library ordinal (this image 0, the main executable -1, a
// flat lookup -2, a weak lookup -3), by name, and true when the table was read. A chained
// image's slots say which import they bind only in the file (dyld overwrites them), so the
// walk names a slot's import by its symbol: every import of a name not in the map has a
// regular ordinal. A name imported under two ordinals maps to ambiguousOrdinal.
func (img *Image) chainedSpecialImports() (map[string]int, bool) {
	data, err := img.ChainedFixupsData()
	if err != nil || len(data) < chainedHeaderSize {
		return nil, false
	}
	var hdr fixupchains.DyldChainedFixupsHeader
	if _, err := binary.Decode(data, binary.LittleEndian, &hdr); err != nil || hdr.FixupsVersion != 0 || hdr.SymbolsFormat != 0 {
		return nil, false
	}
	le := binary.LittleEndian
	var size uint64
	switch hdr.ImportsFormat {
	case fixupchains.DC_IMPORT:
		size = 4
	case fixupchains.DC_IMPORT_ADDEND:
		size = 8
	case fixupchains.DC_IMPORT_ADDEND64:
		size = 16
	default:
		return nil, false
	}
	io, n, so := uint64(hdr.ImportsOffset), uint64(hdr.ImportsCount), uint64(hdr.SymbolsOffset)
	if io > uint64(len(data)) || n > (uint64(len(data))-io)/size || so > uint64(len(data)) {
		return nil, false
	}
	names := data[so:]
	special := map[string]int{}
	regular := map[string]bool{} // names of special imports also imported with a regular ordinal
	for i := uint64(0); i < n; i++ {
		e := data[io+i*size:]
		var ord int
		var off uint64
		if size == 16 {
			v := le.Uint64(e)
			ord, off = int(int16(uint16(v))), v>>32
		} else {
			v := le.Uint32(e)
			ord, off = int(int8(uint8(v))), uint64(v>>9)
		}
		if off >= uint64(len(names)) {
			return nil, false
		}
		z := bytes.IndexByte(names[off:], 0)
		if z < 0 {
			return nil, false
		}
		name := names[off : off+uint64(z)]
		if ord > 0 {
			if _, ok := special[string(name)]; ok {
				special[string(name)] = ambiguousOrdinal
			} else {
				regular[string(name)] = true
			}
			continue
		}
		if prev, ok := special[string(name)]; ok && prev != ord || regular[string(name)] {
			ord = ambiguousOrdinal
		}
		special[string(name)] = ord
	}
	return special, true
}

// ambiguousOrdinal marks a name the chained import table imports under two ordinals: the
// symbol table's ordinal stands.
const ambiguousOrdinal = -1 << 20
