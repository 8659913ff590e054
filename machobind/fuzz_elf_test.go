//go:build unix

package machobind

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"runtime/debug"
	"syscall"
	"testing"
	"unsafe"
)

// fuzzELFSize is the address space an image under FuzzELFImage spans: its loaded segments
// must lie inside it (as a loaded object's are mapped); it holds program headers at any offset
// ParseLoadedELF accepts (up to 1 MiB, 256 of them).
const fuzzELFSize = 2 << 20

// synthELF is a small loaded ELF object of the machine (x86-64 or AArch64), as the dynamic
// linker leaves it in memory: one PT_LOAD from address 0, a dynamic section, a symbol table
// of two names, two lazy (JUMP_SLOT) slots in .rela.plt and, in .rela.dyn, a relative
// relocation (DT_RELACOUNT 1) and two non-lazy (GLOB_DAT) slots.
func synthELF(machine elf.Machine) []byte {
	le := binary.LittleEndian
	img := make([]byte, 0x2100)
	copy(img, elf.ELFMAG)
	img[elf.EI_CLASS], img[elf.EI_DATA], img[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), 1
	le.PutUint16(img[16:], uint16(elf.ET_DYN))
	le.PutUint16(img[18:], uint16(machine))
	le.PutUint64(img[32:], elfHeaderSize) // phoff
	le.PutUint16(img[54:], phdrSize)
	le.PutUint16(img[56:], 2)
	ph := func(i int, typ elf.ProgType, flags elf.ProgFlag, vaddr, size uint64) {
		p := img[elfHeaderSize+i*phdrSize:]
		le.PutUint32(p, uint32(typ))
		le.PutUint32(p[4:], uint32(flags))
		le.PutUint64(p[16:], vaddr)
		le.PutUint64(p[32:], size) // filesz
		le.PutUint64(p[40:], size) // memsz
	}
	ph(0, elf.PT_LOAD, elf.PF_R|elf.PF_X|elf.PF_W, 0, uint64(len(img)))
	ph(1, elf.PT_DYNAMIC, elf.PF_R|elf.PF_W, 0x1000, 10*dynSize)
	jumpSlot, globDat, relative := uint32(elf.R_X86_64_JMP_SLOT), uint32(elf.R_X86_64_GLOB_DAT), uint32(elf.R_X86_64_RELATIVE)
	if machine == elf.EM_AARCH64 {
		jumpSlot, globDat, relative = uint32(elf.R_AARCH64_JUMP_SLOT), uint32(elf.R_AARCH64_GLOB_DAT), uint32(elf.R_AARCH64_RELATIVE)
	}
	dyn := img[0x1000:]
	for i, d := range [][2]uint64{{uint64(elf.DT_SYMTAB), 0x1200}, {uint64(elf.DT_STRTAB), 0x1400}, {uint64(elf.DT_STRSZ), 0x40},
		{uint64(elf.DT_JMPREL), 0x1600}, {uint64(elf.DT_PLTRELSZ), 2 * relaSize}, {uint64(elf.DT_PLTREL), uint64(elf.DT_RELA)},
		{uint64(elf.DT_RELA), 0x1700}, {uint64(elf.DT_RELASZ), 3 * relaSize}, {uint64(elf.DT_RELACOUNT), 1}, {uint64(elf.DT_NULL), 0}} {
		le.PutUint64(dyn[i*dynSize:], d[0])
		le.PutUint64(dyn[i*dynSize+8:], d[1])
	}
	le.PutUint32(img[0x1200+1*symSize:], 1)  // objc_msgSend
	le.PutUint32(img[0x1200+2*symSize:], 14) // malloc
	copy(img[0x1400:], "\x00objc_msgSend\x00malloc\x00")
	rela := func(at int, off uint64, sym, typ uint32) {
		le.PutUint64(img[at:], off)
		le.PutUint64(img[at+8:], uint64(sym)<<32|uint64(typ))
	}
	rela(0x1600, 0x2000, 1, jumpSlot)
	rela(0x1600+relaSize, 0x2008, 2, jumpSlot)
	rela(0x1700, 0x2010, 0, relative)
	rela(0x1700+relaSize, 0x2018, 2, globDat)
	rela(0x1700+2*relaSize, 0x2020, 1, globDat)
	return img
}

// fuzzSlot is what a walk visits: a slot and its name.
type fuzzSlot struct {
	addr  uint64
	kind  Kind
	index int
	name  string
}

// TestSynthELF: the synthetic objects FuzzELFImage starts from give their four slots.
func TestSynthELF(t *testing.T) {
	for _, m := range []elf.Machine{elf.EM_X86_64, elf.EM_AARCH64} {
		slots, err := walkELFImage(t, synthELF(m), nil)
		want := []fuzzSlot{{0x2000, KindLazy, 0, "objc_msgSend"}, {0x2008, KindLazy, 1, "malloc"}, {0x2018, KindNonLazy, 1, "malloc"}, {0x2020, KindNonLazy, 2, "objc_msgSend"}}
		if err != nil || len(slots) != len(want) {
			t.Fatalf("%v: %v %+v", m, err, slots)
		}
		for i := range want {
			if slots[i] != want[i] {
				t.Errorf("%v: slot %d %+v, want %+v", m, i, slots[i], want[i])
			}
		}
	}
}

var (
	fuzzELFMem  []byte // the fuzzed images' address space, with a guard page on each side
	fuzzELFUsed int    // how much of it the last image wrote
)

// walkELFImage maps the image at the start of an address space of fuzzELFSize bytes (guard
// pages around it), reads it with ParseLoadedELF and walks its slots (with filter, only those
// whose names' first two bytes the filter has). An image whose loaded segments reach past
// that space is not a loaded object: it gives no slots and errNotLoaded.
func walkELFImage(t testing.TB, img []byte, filter *namePrefixes) ([]fuzzSlot, error) {
	if fuzzELFMem == nil {
		page := os.Getpagesize()
		m, err := syscall.Mmap(-1, 0, fuzzELFSize+2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mprotect(m[:page], syscall.PROT_NONE); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mprotect(m[page+fuzzELFSize:], syscall.PROT_NONE); err != nil {
			t.Fatal(err)
		}
		fuzzELFMem = m[page : page+fuzzELFSize]
	}
	if len(img) > fuzzELFSize || !loadedInside(img) {
		return nil, errNotLoaded
	}
	clear(fuzzELFMem[:fuzzELFUsed]) // the walk only reads: what the last image wrote
	fuzzELFUsed = copy(fuzzELFMem, img)
	base := uintptr(unsafe.Pointer(&fuzzELFMem[0]))
	e, err := ParseLoadedELF(Loaded{Name: "fuzz", Header: base, Slide: base, ELF: true})
	if err != nil {
		return nil, err
	}
	var out []fuzzSlot
	err = e.walk(filter, func(s *Slot, name, _ []byte) bool {
		out = append(out, fuzzSlot{s.Addr, s.Kind, s.Index, string(name)})
		return true
	})
	return out, err
}

type notLoaded struct{}

func (notLoaded) Error() string { return "the loaded segments reach past the address space" }

var errNotLoaded error = notLoaded{}

// loadedInside reports whether every PT_LOAD the image's program headers list (as
// ParseLoadedELF reads them) lies inside the first fuzzELFSize bytes.
func loadedInside(img []byte) bool {
	if len(img) < elfHeaderSize {
		return true // refused before any segment is read
	}
	le := binary.LittleEndian
	phoff, phnum := le.Uint64(img[32:]), int(le.Uint16(img[56:]))
	if le.Uint16(img[54:]) != phdrSize || phnum == 0 || phnum > 256 || phoff > 1<<20 {
		return true
	}
	for i := 0; i < phnum; i++ {
		at := phoff + uint64(i*phdrSize)
		if at+phdrSize > uint64(len(img)) {
			continue // zeros in the address space: not a PT_LOAD
		}
		p := img[at:]
		if elf.ProgType(le.Uint32(p)) == elf.PT_LOAD {
			vaddr, memsz := le.Uint64(p[16:]), le.Uint64(p[40:])
			if vaddr > fuzzELFSize || memsz > fuzzELFSize-vaddr {
				return false
			}
		}
	}
	return true
}

// FuzzELFImage: ParseLoadedELF and the slot walk, on any object image whose loaded segments
// are mapped, read nothing outside those segments (a guard page on each side of the address
// space; a fault is a panic here), never panic, and visit only slots inside them with names
// the string table terminates; the walk filtered by two names' prefixes (as Rebind walks)
// visits every slot of those names the whole walk does, and only slots it does.
func FuzzELFImage(f *testing.F) {
	f.Add(synthELF(elf.EM_X86_64))
	f.Add(synthELF(elf.EM_AARCH64))
	f.Add([]byte(elf.ELFMAG))
	f.Add(synthELF(elf.EM_386))
	names := NewNameSet("objc_msgSend", "malloc")
	filter := names.prefixes()
	f.Fuzz(func(t *testing.T, img []byte) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		all, err := walkELFImage(t, img, nil)
		if err == errNotLoaded {
			t.Skip(err)
		}
		for _, s := range all {
			if s.addr > fuzzELFSize-8 || len(s.name) > maxSymbolName || bytes.IndexByte([]byte(s.name), 0) >= 0 {
				t.Fatalf("slot %+v", s)
			}
		}
		some, ferr := walkELFImage(t, img, filter)
		if err != nil || ferr != nil {
			return // the filtered walk may stop at, or skip, another slot's bad name
		}
		seen := map[fuzzSlot]bool{}
		for _, s := range all {
			seen[s] = true
		}
		got := map[fuzzSlot]bool{}
		for _, s := range some {
			if !seen[s] {
				t.Fatalf("the filtered walk visits %+v, the whole walk does not", s)
			}
			got[s] = true
		}
		for _, s := range all {
			if _, ok := names.Lookup([]byte(s.name)); ok && !got[s] {
				t.Fatalf("the filtered walk misses %+v", s)
			}
		}
	})
}
