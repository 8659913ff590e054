package simdyld

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	macho "github.com/blacktop/go-macho"
	"github.com/blacktop/go-macho/types"
)

// opReader reads a classic opcode stream.
type opReader struct {
	b []byte
	p int
}

func (r *opReader) uleb() (uint64, error) {
	var v uint64
	for s := uint(0); r.p < len(r.b); s += 7 {
		c := r.b[r.p]
		r.p++
		if s < 64 {
			v |= uint64(c&0x7f) << s
		}
		if c&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errors.New("truncated LEB128")
}

func (r *opReader) sleb() (int64, error) {
	var v int64
	s := uint(0)
	for r.p < len(r.b) {
		c := r.b[r.p]
		r.p++
		if s < 64 {
			v |= int64(c&0x7f) << s
		}
		s += 7
		if c&0x80 == 0 {
			if s < 64 && c&0x40 != 0 {
				v |= -1 << s
			}
			return v, nil
		}
	}
	return 0, errors.New("truncated LEB128")
}

func linkedit(data []byte, off, size uint32) ([]byte, error) {
	if uint64(off)+uint64(size) > uint64(len(data)) {
		return nil, fmt.Errorf("linkedit range [%#x,+%#x) past the file", off, size)
	}
	return data[off : off+size], nil
}

const maxOps = 1 << 24

// classic applies LC_DYLD_INFO: rebase opcodes, then bind, weak bind and (optionally) lazy
// bind opcodes.
func (img *Image) classic(data []byte, di *types.DyldInfoCmd, segs macho.Segments, opt Options) error {
	ops, err := linkedit(data, di.RebaseOff, di.RebaseSize)
	if err != nil {
		return err
	}
	if err := img.rebaseOpcodes(ops, segs); err != nil {
		return fmt.Errorf("rebase opcodes: %w", err)
	}
	for _, st := range []struct {
		off, size  uint32
		lazy, weak bool
	}{{di.BindOff, di.BindSize, false, false}, {di.WeakBindOff, di.WeakBindSize, false, true}, {di.LazyBindOff, di.LazyBindSize, true, false}} {
		ops, err := linkedit(data, st.off, st.size)
		if err != nil {
			return err
		}
		if err := img.bindOpcodes(ops, segs, st.lazy, st.weak, !st.lazy || opt.BindLazy); err != nil {
			return fmt.Errorf("bind opcodes: %w", err)
		}
	}
	return nil
}

func segAt(segs macho.Segments, i uint8) (*macho.Segment, error) {
	if int(i) >= len(segs) {
		return nil, fmt.Errorf("segment index %d of %d", i, len(segs))
	}
	return segs[i], nil
}

func (img *Image) rebaseOpcodes(ops []byte, segs macho.Segments) error {
	r := &opReader{b: ops}
	var seg *macho.Segment
	var off uint64
	n := 0
	do := func() error {
		if seg == nil {
			return errors.New("rebase before a segment")
		}
		if n++; n > maxOps {
			return errors.New("too many rebases")
		}
		b, err := img.at(seg.Addr + off)
		if err != nil {
			return err
		}
		err = img.rebase(seg.Addr+off, binary.LittleEndian.Uint64(b))
		off += 8
		return err
	}
	for r.p < len(ops) {
		op, imm := ops[r.p]&0xf0, ops[r.p]&0x0f
		r.p++
		var err error
		switch op {
		case types.REBASE_OPCODE_DONE:
			return nil
		case types.REBASE_OPCODE_SET_TYPE_IMM:
		case types.REBASE_OPCODE_SET_SEGMENT_AND_OFFSET_ULEB:
			if seg, err = segAt(segs, imm); err == nil {
				off, err = r.uleb()
			}
		case types.REBASE_OPCODE_ADD_ADDR_ULEB:
			var v uint64
			v, err = r.uleb()
			off += v
		case types.REBASE_OPCODE_ADD_ADDR_IMM_SCALED:
			off += uint64(imm) * 8
		case types.REBASE_OPCODE_DO_REBASE_IMM_TIMES:
			for i := 0; i < int(imm) && err == nil; i++ {
				err = do()
			}
		case types.REBASE_OPCODE_DO_REBASE_ULEB_TIMES:
			var c uint64
			c, err = r.uleb()
			for i := uint64(0); i < c && err == nil; i++ {
				err = do()
			}
		case types.REBASE_OPCODE_DO_REBASE_ADD_ADDR_ULEB:
			if err = do(); err == nil {
				var v uint64
				v, err = r.uleb()
				off += v
			}
		case types.REBASE_OPCODE_DO_REBASE_ULEB_TIMES_SKIPPING_ULEB:
			var c, skip uint64
			if c, err = r.uleb(); err == nil {
				skip, err = r.uleb()
			}
			for i := uint64(0); i < c && err == nil; i++ {
				err = do()
				off += skip
			}
		default:
			err = fmt.Errorf("unknown rebase opcode %#x", op)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (img *Image) bindOpcodes(ops []byte, segs macho.Segments, lazy, weak, write bool) error {
	r := &opReader{b: ops}
	var (
		seg     *macho.Segment
		off     uint64
		ordinal int
		sym     string
		addend  int64
		n       int
	)
	do := func() error {
		if seg == nil {
			return errors.New("bind before a segment")
		}
		if n++; n > maxOps {
			return errors.New("too many binds")
		}
		ord := ordinal
		if weak {
			ord = -3
		}
		err := img.bind(seg.Addr+off, ord, sym, addend, lazy, weak, write && !weak, nil)
		off += 8
		return err
	}
	for r.p < len(ops) {
		op, imm := ops[r.p]&0xf0, ops[r.p]&0x0f
		r.p++
		var err error
		switch op {
		case types.BIND_OPCODE_DONE:
			if !lazy {
				return nil
			}
		case types.BIND_OPCODE_SET_DYLIB_ORDINAL_IMM:
			ordinal = int(imm)
		case types.BIND_OPCODE_SET_DYLIB_ORDINAL_ULEB:
			var v uint64
			v, err = r.uleb()
			ordinal = int(v & 0xffff)
		case types.BIND_OPCODE_SET_DYLIB_SPECIAL_IMM:
			ordinal = 0
			if imm != 0 {
				ordinal = int(int8(0xf0 | imm))
			}
		case types.BIND_OPCODE_SET_SYMBOL_TRAILING_FLAGS_IMM:
			e := bytes.IndexByte(ops[r.p:], 0)
			if e < 0 {
				return errors.New("unterminated symbol")
			}
			sym = string(ops[r.p : r.p+e])
			r.p += e + 1
		case types.BIND_OPCODE_SET_TYPE_IMM:
		case types.BIND_OPCODE_SET_ADDEND_SLEB:
			addend, err = r.sleb()
		case types.BIND_OPCODE_SET_SEGMENT_AND_OFFSET_ULEB:
			if seg, err = segAt(segs, imm); err == nil {
				off, err = r.uleb()
			}
		case types.BIND_OPCODE_ADD_ADDR_ULEB:
			var v uint64
			v, err = r.uleb()
			off += v
		case types.BIND_OPCODE_DO_BIND:
			err = do()
		case types.BIND_OPCODE_DO_BIND_ADD_ADDR_ULEB:
			if err = do(); err == nil {
				var v uint64
				v, err = r.uleb()
				off += v
			}
		case types.BIND_OPCODE_DO_BIND_ADD_ADDR_IMM_SCALED:
			if err = do(); err == nil {
				off += uint64(imm) * 8
			}
		case types.BIND_OPCODE_DO_BIND_ULEB_TIMES_SKIPPING_ULEB:
			var c, skip uint64
			if c, err = r.uleb(); err == nil {
				skip, err = r.uleb()
			}
			for i := uint64(0); i < c && err == nil; i++ {
				err = do()
				off += skip
			}
		default:
			err = fmt.Errorf("unsupported bind opcode %#x", op)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Chained pointer formats (mach-o/fixup-chains.h).
const (
	ptrArm64e           = 1
	ptr64               = 2
	ptr64Offset         = 6
	ptrArm64eUserland   = 9
	ptrArm64eUserland24 = 12
)

type chainedImport struct {
	ordinal int
	weak    bool
	name    string
	addend  int64
}

func bits(v uint64, lo, n uint) uint64 { return v >> lo & (1<<n - 1) }

// chained applies LC_DYLD_CHAINED_FIXUPS: every chain of every page of every segment.
func (img *Image) chained(data []byte, off, size uint32, segs macho.Segments) error {
	p, err := linkedit(data, off, size)
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	if len(p) < 28 {
		return errors.New("chained fixups header truncated")
	}
	startsOff, importsOff, symsOff := le.Uint32(p[4:]), le.Uint32(p[8:]), le.Uint32(p[12:])
	count, format := le.Uint32(p[16:]), le.Uint32(p[20:])
	if le.Uint32(p[24:]) != 0 {
		return errors.New("compressed import symbols are not supported")
	}
	imports := make([]chainedImport, 0, min(count, 1<<16))
	name := func(o uint64) (string, error) {
		at := uint64(symsOff) + o
		if at >= uint64(len(p)) {
			return "", errors.New("import name past the payload")
		}
		e := bytes.IndexByte(p[at:], 0)
		if e < 0 {
			return "", errors.New("import name not terminated")
		}
		return string(p[at : at+uint64(e)]), nil
	}
	width := map[uint32]uint64{1: 4, 2: 8, 3: 16}[format]
	if width == 0 {
		return fmt.Errorf("unknown imports format %d", format)
	}
	for i := uint64(0); i < uint64(count); i++ {
		at := uint64(importsOff) + i*width
		if at+width > uint64(len(p)) {
			return errors.New("imports past the payload")
		}
		var im chainedImport
		var no uint64
		switch format {
		case 1, 2:
			v := uint64(le.Uint32(p[at:]))
			im.ordinal, im.weak, no = int(int8(bits(v, 0, 8))), bits(v, 8, 1) != 0, bits(v, 9, 23)
			if format == 2 {
				im.addend = int64(int32(le.Uint32(p[at+4:])))
			}
		case 3:
			v := le.Uint64(p[at:])
			im.ordinal, im.weak, no = int(int16(bits(v, 0, 16))), bits(v, 16, 1) != 0, bits(v, 32, 32)
			im.addend = int64(le.Uint64(p[at+8:]))
		}
		if im.name, err = name(no); err != nil {
			return err
		}
		imports = append(imports, im)
	}
	if uint64(startsOff)+4 > uint64(len(p)) {
		return errors.New("starts past the payload")
	}
	segCount := le.Uint32(p[startsOff:])
	textAddr := uint64(0)
	for _, s := range segs {
		if s.Name == "__TEXT" {
			textAddr = s.Addr
		}
	}
	for si := uint32(0); si < segCount && int(si) < len(segs); si++ {
		at := uint64(startsOff) + 4 + uint64(si)*4
		if at+4 > uint64(len(p)) {
			return errors.New("segment starts past the payload")
		}
		so := le.Uint32(p[at:])
		if so == 0 {
			continue
		}
		s := p[uint64(startsOff)+uint64(so):]
		if len(s) < 22 {
			return errors.New("segment starts truncated")
		}
		pageSize, ptrFormat := uint64(le.Uint16(s[4:])), le.Uint16(s[6:])
		segOffset, pageCount := le.Uint64(s[8:]), int(le.Uint16(s[20:]))
		if len(s) < 22+2*pageCount {
			return errors.New("page starts truncated")
		}
		for pg := 0; pg < pageCount; pg++ {
			ps := le.Uint16(s[22+2*pg:])
			if ps == 0xffff {
				continue
			}
			if ps&0x8000 != 0 {
				return errors.New("multiple chain starts per page (32-bit formats) not supported")
			}
			loc := textAddr + segOffset + uint64(pg)*pageSize + uint64(ps)
			if err := img.walkChain(loc, ptrFormat, imports, textAddr); err != nil {
				return fmt.Errorf("segment %d page %d: %w", si, pg, err)
			}
		}
	}
	return nil
}

func (img *Image) walkChain(loc uint64, format uint16, imports []chainedImport, textAddr uint64) error {
	for n := 0; ; n++ {
		if n > maxOps {
			return errors.New("chain too long")
		}
		b, err := img.at(loc)
		if err != nil {
			return err
		}
		v := binary.LittleEndian.Uint64(b)
		var next, stride uint64
		imp := func(ord uint64) (chainedImport, error) {
			if ord >= uint64(len(imports)) {
				return chainedImport{}, fmt.Errorf("import %d of %d", ord, len(imports))
			}
			return imports[ord], nil
		}
		switch format {
		case ptr64, ptr64Offset:
			stride, next = 4, bits(v, 51, 12)
			if bits(v, 63, 1) != 0 { // bind
				im, err := imp(bits(v, 0, 24))
				if err != nil {
					return err
				}
				if err := img.bind(loc, im.ordinal, im.name, im.addend+int64(bits(v, 24, 8)), false, false, true, nil); err != nil {
					return err
				}
			} else {
				target := bits(v, 0, 36)
				if format == ptr64Offset {
					target += textAddr
				}
				target |= bits(v, 36, 8) << 56
				if err := img.rebase(loc, target); err != nil {
					return err
				}
			}
		case ptrArm64e, ptrArm64eUserland, ptrArm64eUserland24:
			stride, next = 8, bits(v, 51, 11)
			auth, isBind := bits(v, 63, 1) != 0, bits(v, 62, 1) != 0
			var ai *AuthInfo
			if auth {
				ai = &AuthInfo{Key: uint8(bits(v, 49, 2)), AddrDiv: bits(v, 48, 1) != 0, Diversity: uint16(bits(v, 32, 16))}
			}
			ordBits := uint(16)
			if format == ptrArm64eUserland24 {
				ordBits = 24
			}
			switch {
			case isBind:
				im, err := imp(bits(v, 0, ordBits))
				if err != nil {
					return err
				}
				addend := im.addend
				if !auth {
					addend += int64(bits(v, 32, 19)<<45) >> 45 // 19-bit signed
				}
				if err := img.bind(loc, im.ordinal, im.name, addend, false, false, true, ai); err != nil {
					return err
				}
			case auth:
				if err := img.rebase(loc, textAddr+bits(v, 0, 32)); err != nil {
					return err
				}
			default:
				target := bits(v, 0, 43)
				if format != ptrArm64e {
					target += textAddr
				}
				if err := img.rebase(loc, target|bits(v, 43, 8)<<56); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("pointer format %d not supported", format)
		}
		if next == 0 {
			return nil
		}
		loc += next * stride
	}
}
