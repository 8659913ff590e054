package machobind

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
)

// ELFImage is an ELF object loaded in this process, read through its dynamic section: the
// JUMP_SLOT (lazy, PLT) and GLOB_DAT (non-lazy, GOT) relocations are its pointer slots.
type ELFImage struct {
	l          Loaded
	machine    elf.Machine
	codeLo     uint64
	codeHi     uint64
	symtab     uint64 // absolute addresses
	strtab     uint64
	strsz      uint64
	nsyms      uint64
	relocs     [][3]uint64 // (address, size, index of the first) of .rela.plt and .rela.dyn
	loadRanges [][2]uint64 // unslid [lo, hi) of each PT_LOAD
}

const (
	elfHeaderSize = 64
	phdrSize      = 56
	dynSize       = 16
	relaSize      = 24
	symSize       = 24
	maxDynEntries = 1 << 16
)

// ParseLoadedELF reads a 64-bit little-endian ELF object mapped at l.Header with load bias
// l.Slide. Objects it cannot use (no dynamic section, no relocations: the vdso, static
// executables) give an error and are skipped.
func ParseLoadedELF(l Loaded) (*ELFImage, error) {
	if l.Header == 0 {
		return nil, errors.New("ELF header at address 0")
	}
	h := memBytes(l.Header, elfHeaderSize)
	if !bytes.Equal(h[:4], []byte(elf.ELFMAG)) || elf.Class(h[elf.EI_CLASS]) != elf.ELFCLASS64 || elf.Data(h[elf.EI_DATA]) != elf.ELFDATA2LSB {
		return nil, errors.New("not a 64-bit little-endian ELF object")
	}
	le := binary.LittleEndian
	// the fields read by hand: binary.Decode's reflection cost ~7 µs an object, at every
	// start, for each of a program's objects
	eh := elf.Header64{Machine: le.Uint16(h[18:]), Phoff: le.Uint64(h[32:]), Phentsize: le.Uint16(h[54:]), Phnum: le.Uint16(h[56:])}
	if eh.Phentsize != phdrSize || eh.Phnum == 0 || eh.Phnum > 256 || eh.Phoff > 1<<20 {
		return nil, fmt.Errorf("unusual program headers (%d of %d bytes at %#x)", eh.Phnum, eh.Phentsize, eh.Phoff)
	}
	img := &ELFImage{l: l, machine: elf.Machine(eh.Machine)}
	var dyn *elf.Prog64
	for i := 0; i < int(eh.Phnum); i++ {
		b := memBytes(l.Header+uintptr(eh.Phoff)+uintptr(i*phdrSize), phdrSize)
		ph := elf.Prog64{Type: le.Uint32(b), Flags: le.Uint32(b[4:]), Vaddr: le.Uint64(b[16:]), Memsz: le.Uint64(b[40:])}
		switch elf.ProgType(ph.Type) {
		case elf.PT_LOAD:
			img.loadRanges = append(img.loadRanges, [2]uint64{ph.Vaddr, ph.Vaddr + ph.Memsz})
			if elf.ProgFlag(ph.Flags)&elf.PF_X != 0 {
				if img.codeHi == 0 || ph.Vaddr < img.codeLo {
					img.codeLo = ph.Vaddr
				}
				img.codeHi = max(img.codeHi, ph.Vaddr+ph.Memsz)
			}
		case elf.PT_DYNAMIC:
			p := ph
			dyn = &p
		}
	}
	if dyn == nil {
		return nil, errors.New("no dynamic section")
	}
	if !img.mapped(dyn.Vaddr, dyn.Memsz) {
		return nil, errors.New("dynamic section outside the loaded segments")
	}
	var jmprel, pltrelsz, rela, relasz, relacount, hash uint64
	n := min(dyn.Memsz/dynSize, maxDynEntries)
	d := memBytes(l.Slide+uintptr(dyn.Vaddr), n*dynSize)
	for i := uint64(0); i < n; i++ {
		tag, val := elf.DynTag(le.Uint64(d[i*dynSize:])), le.Uint64(d[i*dynSize+8:])
		switch tag {
		case elf.DT_NULL:
			i = n
		case elf.DT_JMPREL:
			jmprel = img.abs(val)
		case elf.DT_PLTRELSZ:
			pltrelsz = val
		case elf.DT_RELA:
			rela = img.abs(val)
		case elf.DT_RELASZ:
			relasz = val
		case elf.DT_RELACOUNT:
			relacount = val
		case elf.DT_SYMTAB:
			img.symtab = img.abs(val)
		case elf.DT_STRTAB:
			img.strtab = img.abs(val)
		case elf.DT_STRSZ:
			img.strsz = val
		case elf.DT_HASH:
			hash = img.abs(val)
		case elf.DT_PLTREL:
			if elf.DynTag(val) != elf.DT_RELA {
				return nil, errors.New("REL (not RELA) PLT relocations are not supported")
			}
		}
	}
	if img.symtab == 0 || img.strtab == 0 {
		return nil, errors.New("no dynamic symbol table")
	}
	// The number of symbols: DT_HASH's nchain, else the gap to the string table that follows
	// the symbol table in every linker's layout.
	switch {
	case hash != 0 && img.mappedAbs(hash, 8):
		img.nsyms = uint64(le.Uint32(memBytes(uintptr(hash)+4, 4)))
	case img.strtab > img.symtab:
		img.nsyms = (img.strtab - img.symtab) / symSize
	default:
		return nil, errors.New("cannot bound the dynamic symbol table")
	}
	if !img.mappedAbs(img.symtab, img.nsyms*symSize) || !img.mappedAbs(img.strtab, img.strsz) {
		return nil, errors.New("symbol or string table outside the loaded segments")
	}
	for _, r := range [][2]uint64{{jmprel, pltrelsz}, {rela, relasz}} {
		if r[0] == 0 || r[1] == 0 {
			continue
		}
		if r[1]%relaSize != 0 || !img.mappedAbs(r[0], r[1]) {
			return nil, fmt.Errorf("relocation table [%#x, +%#x) is malformed", r[0], r[1])
		}
		img.relocs = append(img.relocs, [3]uint64{r[0], r[1], 0})
	}
	img.skipRelative(rela, relacount)
	return img, nil
}

// skipRelative leaves out of the walk the relative relocations that DT_RELACOUNT says open
// .rela.dyn (linkers sort them first): they name no symbol, and in a library with Objective-C
// or C++ metadata they are most of the table (libgnustep-base: 63,645 of 66,135), read at every
// walk for nothing. The count is used only when the last relocation it covers is relative.
func (img *ELFImage) skipRelative(rela, count uint64) {
	var relative uint32
	switch img.machine {
	case elf.EM_X86_64:
		relative = uint32(elf.R_X86_64_RELATIVE)
	case elf.EM_AARCH64:
		relative = uint32(elf.R_AARCH64_RELATIVE)
	default:
		return
	}
	for i, r := range img.relocs {
		if r[0] != rela || count == 0 || count > r[1]/relaSize {
			continue
		}
		last := memBytes(uintptr(r[0]+(count-1)*relaSize), relaSize)
		if uint32(binary.LittleEndian.Uint64(last[8:])) == relative {
			img.relocs[i] = [3]uint64{r[0] + count*relaSize, r[1] - count*relaSize, count}
		}
	}
}

// abs turns a d_ptr value into an address: glibc has already added the load bias to the
// dynamic section's pointers in memory, other loaders leave them as link-time addresses.
func (img *ELFImage) abs(v uint64) uint64 {
	if s := uint64(img.l.Slide); s != 0 && v >= s {
		return v
	}
	return v + uint64(img.l.Slide)
}

func (img *ELFImage) mapped(vaddr, size uint64) bool {
	for _, r := range img.loadRanges {
		if vaddr >= r[0] && size <= r[1]-r[0] && vaddr-r[0] <= r[1]-r[0]-size {
			return true
		}
	}
	return false
}

func (img *ELFImage) mappedAbs(addr, size uint64) bool {
	s := uint64(img.l.Slide)
	return addr >= s && img.mapped(addr-s, size)
}

// WalkSlots visits every JUMP_SLOT and GLOB_DAT relocation with a named symbol. Slot addresses
// are unslid (link-time) addresses, as for Mach-O.
func (img *ELFImage) WalkSlots(visit SlotVisitor) error { return img.walk(nil, visit) }

// walk is WalkSlots; with a filter, it visits only the slots whose names begin with two bytes
// the filter holds (Rebind looks for a few names among thousands of slots: most are left
// without reading more of their names or making a Slot).
//
// The relocations are taken in batches of walkBatch: their symbols' entries, then those
// names' first two bytes, are each read in a loop of their own. In a running process these
// reads land on cold lines all over every object's symbol and string tables (~60 ns each,
// most of the walk's time, on the preload loader's early thread); loads that depend on
// nothing before them are in flight together, where one slot at a time waited for each.
func (img *ELFImage) walk(filter *namePrefixes, visit SlotVisitor) error {
	var jumpSlot, globDat uint32
	switch img.machine {
	case elf.EM_X86_64:
		jumpSlot, globDat = uint32(elf.R_X86_64_JMP_SLOT), uint32(elf.R_X86_64_GLOB_DAT)
	case elf.EM_AARCH64:
		jumpSlot, globDat = uint32(elf.R_AARCH64_JUMP_SLOT), uint32(elf.R_AARCH64_GLOB_DAT)
	default:
		return fmt.Errorf("ELF machine %v is not supported", img.machine)
	}
	le := binary.LittleEndian
	strs := memBytes(uintptr(img.strtab), img.strsz)
	symtab := memBytes(uintptr(img.symtab), img.nsyms*symSize)
	var (
		at    [walkBatch]uint64 // a relocation's index in its table
		sym   [walkBatch]uint64 // its symbol
		name  [walkBatch]uint64 // the symbol's name's offset
		maybe [walkBatch]bool   // the name's first two bytes are the filter's (or no filter)
		slot  Slot
	)
	for _, r := range img.relocs {
		rel := memBytes(uintptr(r[0]), r[1])
		n := r[1] / relaSize
		for i := uint64(0); i < n; {
			// the batch: slot relocations with a symbol (the relocations' table is read in order)
			k := 0
			for ; i < n && k < walkBatch; i++ {
				info := le.Uint64(rel[i*relaSize+8:])
				if typ, s := uint32(info), info>>32; (typ == jumpSlot || typ == globDat) && s != 0 && s < img.nsyms {
					at[k], sym[k] = i, s
					k++
				}
			}
			for j := 0; j < k; j++ {
				name[j] = uint64(le.Uint32(symtab[sym[j]*symSize:]))
			}
			for j := 0; j < k; j++ {
				o := name[j]
				maybe[j] = filter == nil || o+1 >= img.strsz || filter.has(strs[o], strs[o+1])
			}
			for j := 0; j < k; j++ {
				off := le.Uint64(rel[at[j]*relaSize:])
				kind := KindNonLazy
				if uint32(le.Uint64(rel[at[j]*relaSize+8:])) == jumpSlot {
					kind = KindLazy
				}
				if !img.mapped(off, 8) {
					continue
				}
				nameOff := name[j]
				if nameOff >= img.strsz {
					return fmt.Errorf("symbol %d name offset %#x past the string table", sym[j], nameOff)
				}
				if !maybe[j] {
					continue
				}
				nm := strs[nameOff:min(uint64(len(strs)), nameOff+maxSymbolName+1)]
				z := bytes.IndexByte(nm, 0)
				if z < 0 {
					return fmt.Errorf("symbol %d name is not terminated", sym[j])
				}
				slot = Slot{Addr: off, Kind: kind, Index: int(r[2] + at[j]), Indirect: uint32(sym[j]), Ordinal: FlatLookupOrdinal}
				if !visit(&slot, nm[:z], nil) {
					return nil
				}
			}
		}
	}
	return nil
}

// walkBatch is how many slot relocations walk reads the symbols and names of at a time.
const walkBatch = 64

// LibraryName: ELF imports name no library (symbol lookup is by scope); every slot reports
// "flat-namespace", so a Rebinding's Library filter matches nothing but "".
func (img *ELFImage) LibraryName(int) string { return "flat-namespace" }

func (img *ELFImage) ownCode() (uint64, uint64) { return img.codeLo, img.codeHi }
