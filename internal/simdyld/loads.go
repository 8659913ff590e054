//go:build linux

package simdyld

// Load commands: segments, dylibs and the fixup commands read from the header.

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/blacktop/go-macho/types"
)

// fixups are the fixup load commands of an image.
type fixups struct {
	chained      *[2]uint32 // LC_DYLD_CHAINED_FIXUPS dataoff, datasize
	info         *types.DyldInfoCmd
	infoOnlyName string
	// for images with neither (bound from the indirect symbol table and relocations)
	flags    uint32
	symtab   *[4]uint32 // LC_SYMTAB symoff, nsyms, stroff, strsize
	dysymtab *[6]uint32 // LC_DYSYMTAB indirectsymoff, nindirectsyms, extreloff, nextrel, locreloff, nlocrel
	ptrSecs  []ptrSection
}

// ptrSection is a symbol-pointer section: where its slots are and where their entries start in
// the indirect symbol table.
type ptrSection struct {
	name       string
	addr, size uint64
	typ        uint32 // S_NON_LAZY_SYMBOL_POINTERS or S_LAZY_SYMBOL_POINTERS
	first      uint32 // reserved1
}

// readLoads reads the load commands: segments, dylibs (in ordinal order) and the fixup
// commands. go-macho's NewFile is not used here: it parses much more (code signature and
// all), trusting sizes in the file, and can run out of memory on a corrupted one.
func (img *Image) readLoads(data []byte) (*fixups, error) {
	le := binary.LittleEndian
	ncmds, sizeofcmds := uint64(le.Uint32(data[16:])), uint64(le.Uint32(data[20:]))
	const hdr = 32
	if sizeofcmds > uint64(len(data))-hdr {
		return nil, fmt.Errorf("load commands (%#x bytes) past the file", sizeofcmds)
	}
	cmds := data[hdr : hdr+sizeofcmds]
	fx := fixups{flags: le.Uint32(data[24:])}
	str := func(c []byte, off uint32) string {
		if uint64(off) >= uint64(len(c)) {
			return ""
		}
		b := c[off:]
		if i := bytes.IndexByte(b, 0); i >= 0 {
			b = b[:i]
		}
		return string(b)
	}
	for i, p := uint64(0), uint64(0); i < ncmds; i++ {
		if uint64(len(cmds))-p < 8 {
			return nil, fmt.Errorf("load command %d past sizeofcmds", i)
		}
		cmd, size := types.LoadCmd(le.Uint32(cmds[p:])), uint64(le.Uint32(cmds[p+4:]))
		if size < 8 || size > uint64(len(cmds))-p {
			return nil, fmt.Errorf("load command %d (%v) of size %#x", i, cmd, size)
		}
		c := cmds[p : p+size]
		p += size
		need := map[types.LoadCmd]uint64{types.LC_SEGMENT_64: 72, types.LC_DYLD_INFO: 48, types.LC_DYLD_INFO_ONLY: 48,
			types.LC_DYLD_CHAINED_FIXUPS: 16, types.LC_LOAD_DYLIB: 24, types.LC_LOAD_WEAK_DYLIB: 24, types.LC_REEXPORT_DYLIB: 24,
			types.LC_LAZY_LOAD_DYLIB: 24, types.LC_LOAD_UPWARD_DYLIB: 24, types.LC_SYMTAB: 24, types.LC_DYSYMTAB: 80}[cmd]
		if size < need {
			return nil, fmt.Errorf("load command %d (%v) too short", i, cmd)
		}
		switch cmd {
		case types.LC_SEGMENT_64:
			name := c[8:24]
			if j := bytes.IndexByte(name, 0); j >= 0 {
				name = name[:j]
			}
			img.segs = append(img.segs, seg{name: string(name), addr: le.Uint64(c[24:]), memsz: le.Uint64(c[32:]),
				off: le.Uint64(c[40:]), filesz: le.Uint64(c[48:]), initprot: le.Uint32(c[60:]), flags: le.Uint32(c[68:])})
			for j, nsect := uint64(0), uint64(le.Uint32(c[64:])); j < nsect && 72+80*(j+1) <= size; j++ {
				sc := c[72+80*j:]
				if typ := le.Uint32(sc[64:]) & 0xff; typ == 6 || typ == 7 {
					sn := sc[:16]
					if k := bytes.IndexByte(sn, 0); k >= 0 {
						sn = sn[:k]
					}
					fx.ptrSecs = append(fx.ptrSecs, ptrSection{name: string(sn), addr: le.Uint64(sc[32:]), size: le.Uint64(sc[40:]),
						typ: typ, first: le.Uint32(sc[68:])})
				}
			}
		case types.LC_SYMTAB:
			fx.symtab = &[4]uint32{le.Uint32(c[8:]), le.Uint32(c[12:]), le.Uint32(c[16:]), le.Uint32(c[20:])}
		case types.LC_DYSYMTAB:
			fx.dysymtab = &[6]uint32{le.Uint32(c[56:]), le.Uint32(c[60:]), le.Uint32(c[64:]), le.Uint32(c[68:]), le.Uint32(c[72:]), le.Uint32(c[76:])}
		case types.LC_LOAD_DYLIB, types.LC_LOAD_WEAK_DYLIB, types.LC_REEXPORT_DYLIB, types.LC_LAZY_LOAD_DYLIB, types.LC_LOAD_UPWARD_DYLIB:
			img.dylibs = append(img.dylibs, str(c, le.Uint32(c[8:])))
		case types.LC_DYLD_CHAINED_FIXUPS:
			fx.chained = &[2]uint32{le.Uint32(c[8:]), le.Uint32(c[12:])}
		case types.LC_DYLD_INFO, types.LC_DYLD_INFO_ONLY:
			fx.info = &types.DyldInfoCmd{LoadCmd: cmd, Len: uint32(size),
				RebaseOff: le.Uint32(c[8:]), RebaseSize: le.Uint32(c[12:]), BindOff: le.Uint32(c[16:]), BindSize: le.Uint32(c[20:]),
				WeakBindOff: le.Uint32(c[24:]), WeakBindSize: le.Uint32(c[28:]), LazyBindOff: le.Uint32(c[32:]), LazyBindSize: le.Uint32(c[36:]),
				ExportOff: le.Uint32(c[40:]), ExportSize: le.Uint32(c[44:])}
			fx.infoOnlyName = cmd.String()
		}
	}
	return &fx, nil
}
