package simdyld

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// indirect binds an image that has neither chained fixups nor LC_DYLD_INFO (Mac OS X 10.5 and
// older): dyld bound its symbol pointers from the indirect symbol table, each to the symbol's
// library ordinal in n_desc (two-level namespace) or by flat lookup, non-lazy ones at load
// and lazy ones on first call; it rebased through LC_DYSYMTAB's local relocations and bound
// other data through its external relocations. Relocations are not applied here: an image
// that has any is refused with their count. Without local relocations the image was not built
// to slide (dyld loaded it at its own address), so the in-image addresses its slots hold (lazy
// pointers' stub helpers, INDIRECT_SYMBOL_LOCAL entries) are moved with the slide here.
func (img *Image) indirect(data []byte, fx *fixups, opt Options) error {
	const dyldLink, twoLevel = 0x4, 0x80
	if fx.flags&dyldLink == 0 {
		return nil // not loaded by dyld: nothing is bound
	}
	if fx.symtab == nil || fx.dysymtab == nil {
		return errors.New("symbol pointers but no LC_SYMTAB/LC_DYSYMTAB")
	}
	dy, st := fx.dysymtab, fx.symtab
	if dy[3] != 0 || dy[5] != 0 {
		return fmt.Errorf("image binds through %d external relocations and rebases through %d local relocations, which the simulated dyld does not apply", dy[3], dy[5])
	}
	ind, err := linkedit(data, dy[0], dy[1]*4)
	if err != nil {
		return fmt.Errorf("indirect symbol table: %w", err)
	}
	syms, err := linkedit(data, st[0], st[1]*16)
	if err != nil {
		return fmt.Errorf("symbol table: %w", err)
	}
	strs, err := linkedit(data, st[2], st[3])
	if err != nil {
		return fmt.Errorf("string table: %w", err)
	}
	le := binary.LittleEndian
	for _, ps := range fx.ptrSecs {
		s := img.segmentAt(ps.addr)
		if s == nil {
			return fmt.Errorf("section %s at %#x is in no segment", ps.name, ps.addr)
		}
		for i := uint64(0); i < ps.size/8; i++ {
			at := (uint64(ps.first) + i) * 4
			if at+4 > uint64(len(ind)) {
				return fmt.Errorf("section %s slot %d past the %d indirect symbols", ps.name, i, len(ind)/4)
			}
			addr := ps.addr + i*8
			e := le.Uint32(ind[at:])
			if e&0xc0000000 != 0 { // INDIRECT_SYMBOL_LOCAL / _ABS: no symbol
				if e&0x40000000 == 0 { // LOCAL: an address in the image
					if err := img.slideInImage(addr, s); err != nil {
						return err
					}
				}
				continue
			}
			if uint64(e)*16+16 > uint64(len(syms)) {
				return fmt.Errorf("section %s slot %d: symbol %d of %d", ps.name, i, e, len(syms)/16)
			}
			nl := syms[e*16:]
			strx := uint64(le.Uint32(nl))
			if strx >= uint64(len(strs)) {
				return fmt.Errorf("section %s slot %d: name offset %#x past the string table", ps.name, i, strx)
			}
			name := strs[strx:]
			if z := bytes.IndexByte(name, 0); z >= 0 {
				name = name[:z]
			}
			ntype, desc := nl[4], le.Uint16(nl[6:])
			ord := int(desc >> 8)
			switch {
			case ntype&0x0e != 0: // defined here
				ord = 0
			case fx.flags&twoLevel == 0:
				ord = -2
			case ord == 0xff:
				ord = -1
			case ord == 0xfe:
				ord = -2
			}
			kind := bindNow
			if ps.typ == 7 {
				kind = bindLazy
				if !opt.BindLazy {
					if err := img.slideInImage(addr, s); err != nil {
						return err
					}
				}
			}
			if err := img.bind(addr, s, ord, string(name), 0, kind, kind != bindLazy || opt.BindLazy, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// slideInImage moves a pointer that holds an address inside the image by the slide.
func (img *Image) slideInImage(addr uint64, s *seg) error {
	b, err := img.word(addr, s)
	if err != nil {
		return err
	}
	if v := le64(b); v >= img.base && v-img.base < uint64(len(img.mem)) {
		return img.rebase(addr, s, v)
	}
	return nil
}

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
