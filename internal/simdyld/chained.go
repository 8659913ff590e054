//go:build linux

package simdyld

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Chained pointer formats (mach-o/fixup-chains.h, DYLD_CHAINED_PTR_*).
const (
	ptrArm64e           = 1
	ptr64               = 2
	ptr64Offset         = 6
	ptrArm64eUserland   = 9
	ptrArm64eUserland24 = 12
)

var ptrNames = map[uint16]string{
	ptrArm64e:           "DYLD_CHAINED_PTR_ARM64E",
	ptr64:               "DYLD_CHAINED_PTR_64",
	ptr64Offset:         "DYLD_CHAINED_PTR_64_OFFSET",
	ptrArm64eUserland:   "DYLD_CHAINED_PTR_ARM64E_USERLAND",
	ptrArm64eUserland24: "DYLD_CHAINED_PTR_ARM64E_USERLAND24",
}

var importNames = map[uint32]string{1: "DYLD_CHAINED_IMPORT", 2: "DYLD_CHAINED_IMPORT_ADDEND", 3: "DYLD_CHAINED_IMPORT_ADDEND64"}

// chainedImport is one entry of the imports table (or of a threaded bind's ordinal table).
type chainedImport struct {
	ordinal int
	weak    bool // weak_import: may be missing at run time
	name    string
	addend  int64
}

func bits(v uint64, lo, n uint) uint64 { return v >> lo & (1<<n - 1) }

// signedOrdinal decodes an n-bit library ordinal as dyld does: the top 15 values are the
// special (negative) ordinals.
func signedOrdinal(v uint64, n uint) int {
	if v > 1<<n-16 {
		return int(v) - 1<<n
	}
	return int(v)
}

// chained applies LC_DYLD_CHAINED_FIXUPS: every chain of every page of every segment.
func (img *Image) chained(data []byte, off, size uint32) error {
	p, err := linkedit(data, off, size)
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	if len(p) < 28 {
		return errors.New("chained fixups header truncated")
	}
	if v := le.Uint32(p); v != 0 {
		return fmt.Errorf("chained fixups version %d", v)
	}
	startsOff, importsOff, symsOff := uint64(le.Uint32(p[4:])), uint64(le.Uint32(p[8:])), uint64(le.Uint32(p[12:]))
	count, format := uint64(le.Uint32(p[16:])), le.Uint32(p[20:])
	if f := le.Uint32(p[24:]); f != 0 {
		return fmt.Errorf("symbols format %d (compressed) is not supported", f)
	}
	width := map[uint32]uint64{1: 4, 2: 8, 3: 16}[format]
	if width == 0 {
		return fmt.Errorf("unknown imports format %d", format)
	}
	img.stats[importNames[format]]++
	if importsOff > uint64(len(p)) || count > (uint64(len(p))-importsOff)/width {
		return errors.New("imports past the payload")
	}
	name := func(o uint64) (string, error) {
		if symsOff > uint64(len(p)) || o >= uint64(len(p))-symsOff {
			return "", fmt.Errorf("import name at %#x past the payload", o)
		}
		at := symsOff + o
		e := bytes.IndexByte(p[at:], 0)
		if e < 0 {
			return "", errors.New("import name not terminated")
		}
		return string(p[at : at+uint64(e)]), nil
	}
	imports := make([]chainedImport, 0, count)
	for i := uint64(0); i < count; i++ {
		at := importsOff + i*width
		var im chainedImport
		var no uint64
		switch format {
		case 1, 2: // lib_ordinal:8 weak_import:1 name_offset:23 [int32 addend]
			v := uint64(le.Uint32(p[at:]))
			im.ordinal, im.weak, no = signedOrdinal(bits(v, 0, 8), 8), bits(v, 8, 1) != 0, bits(v, 9, 23)
			if format == 2 {
				im.addend = int64(int32(le.Uint32(p[at+4:])))
			}
		case 3: // lib_ordinal:16 weak_import:1 reserved:15 name_offset:32, uint64 addend
			v := le.Uint64(p[at:])
			im.ordinal, im.weak, no = signedOrdinal(bits(v, 0, 16), 16), bits(v, 16, 1) != 0, bits(v, 32, 32)
			im.addend = int64(le.Uint64(p[at+8:]))
		}
		if im.name, err = name(no); err != nil {
			return err
		}
		imports = append(imports, im)
	}
	if startsOff > uint64(len(p)) || uint64(len(p))-startsOff < 4 {
		return errors.New("starts past the payload")
	}
	starts := p[startsOff:]
	segCount := uint64(le.Uint32(starts))
	if segCount > (uint64(len(starts))-4)/4 {
		return errors.New("segment starts past the payload")
	}
	for si := uint64(0); si < segCount; si++ {
		so := uint64(le.Uint32(starts[4+si*4:]))
		if so == 0 {
			continue
		}
		if si >= uint64(len(img.segs)) {
			return fmt.Errorf("chain starts for segment %d of %d", si, len(img.segs))
		}
		sg := &img.segs[si]
		if so > uint64(len(starts)) || uint64(len(starts))-so < 22 {
			return fmt.Errorf("segment %s starts truncated", sg.name)
		}
		s := starts[so:]
		pageSize, ptrFormat := uint64(le.Uint16(s[4:])), le.Uint16(s[6:])
		segOffset, pageCount := le.Uint64(s[8:]), uint64(le.Uint16(s[20:]))
		if uint64(len(s)) < 22+2*pageCount {
			return fmt.Errorf("segment %s page starts truncated", sg.name)
		}
		if sg.addr-img.text != segOffset {
			return fmt.Errorf("segment %s: chain starts say offset %#x, the segment is at %#x", sg.name, segOffset, sg.addr-img.text)
		}
		if pageSize == 0 || pageCount*pageSize > sg.memsz+pageSize {
			return fmt.Errorf("segment %s: %d pages of %#x", sg.name, pageCount, pageSize)
		}
		for pg := uint64(0); pg < pageCount; pg++ {
			ps := uint64(le.Uint16(s[22+2*pg:]))
			if ps == 0xffff { // DYLD_CHAINED_PTR_START_NONE
				continue
			}
			if ps&0x8000 != 0 {
				return errors.New("multiple chain starts per page (32-bit formats) are not supported")
			}
			loc := sg.addr + pg*pageSize + ps
			if err := img.walkChain(loc, sg, ptrFormat, imports); err != nil {
				return fmt.Errorf("segment %s page %d: %w", sg.name, pg, err)
			}
		}
	}
	return nil
}

// walkChain applies one chain of pointers of a format, starting at an unslid address in
// segment s.
func (img *Image) walkChain(loc uint64, s *seg, format uint16, imports []chainedImport) error {
	name, ok := ptrNames[format]
	if !ok {
		return fmt.Errorf("pointer format %d is not supported", format)
	}
	img.stats[name]++
	imp := func(ord uint64) (chainedImport, error) {
		if ord >= uint64(len(imports)) {
			return chainedImport{}, fmt.Errorf("import %d of %d", ord, len(imports))
		}
		return imports[ord], nil
	}
	for n := 0; ; n++ {
		if n > maxOps {
			return errors.New("chain too long")
		}
		b, err := img.word(loc, s)
		if err != nil {
			return err
		}
		v := binary.LittleEndian.Uint64(b)
		var next, stride uint64
		switch format {
		case ptr64, ptr64Offset:
			// rebase: target:36 high8:8 reserved:7 next:12 bind:1
			// bind:   ordinal:24 addend:8 reserved:19 next:12 bind:1
			stride, next = 4, bits(v, 51, 12)
			if bits(v, 63, 1) != 0 {
				img.stats[name+" bind"]++
				im, err := imp(bits(v, 0, 24))
				if err != nil {
					return err
				}
				if err := img.bind(loc, s, im.ordinal, im.name, im.addend+int64(bits(v, 24, 8)), bindNow, true, nil); err != nil {
					return err
				}
			} else {
				img.stats[name+" rebase"]++
				target := bits(v, 0, 36)
				if format == ptr64Offset {
					target += img.text
				}
				if err := img.rebase(loc, s, target|bits(v, 36, 8)<<56); err != nil {
					return err
				}
			}
		default: // the arm64e formats: next:11 at 51, bind at 62, auth at 63; stride 8
			stride, next = 8, bits(v, 51, 11)
			auth, isBind := bits(v, 63, 1) != 0, bits(v, 62, 1) != 0
			var ai *AuthInfo
			if auth {
				// diversity:16 at 32, addrDiv:1 at 48, key:2 at 49
				ai = &AuthInfo{Key: uint8(bits(v, 49, 2)), AddrDiv: bits(v, 48, 1) != 0, Diversity: uint16(bits(v, 32, 16))}
			}
			switch {
			case isBind:
				// ordinal:16 (24 in USERLAND24); auth: diversity etc.; plain: addend:19 (signed) at 32
				ordBits := uint(16)
				if format == ptrArm64eUserland24 {
					ordBits = 24
				}
				im, err := imp(bits(v, 0, ordBits))
				if err != nil {
					return err
				}
				addend := im.addend
				if auth {
					img.stats[name+" auth bind"]++
				} else {
					img.stats[name+" bind"]++
					addend += int64(bits(v, 32, 19)<<45) >> 45
				}
				if err := img.bind(loc, s, im.ordinal, im.name, addend, bindNow, true, ai); err != nil {
					return err
				}
			case auth:
				// target:32 is an offset from the mach header; the signature is not ours to make
				img.stats[name+" auth rebase"]++
				if err := img.rebase(loc, s, img.text+bits(v, 0, 32)); err != nil {
					return err
				}
			default:
				// target:43 (vmaddr in ARM64E, offset from the header in USERLAND*) high8:8
				img.stats[name+" rebase"]++
				target := bits(v, 0, 43)
				if format != ptrArm64e {
					target += img.text
				}
				if err := img.rebase(loc, s, target|bits(v, 43, 8)<<56); err != nil {
					return err
				}
			}
		}
		if next == 0 {
			return nil
		}
		loc += next * stride
	}
}
