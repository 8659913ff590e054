//go:build linux

package simdyld

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

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
		if s >= 64 && c&0x7f != 0 || s == 63 && c&0x7e != 0 {
			return 0, errors.New("LEB128 overflows 64 bits")
		}
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

// maxOps bounds the steps of one opcode stream or chain (malformed input loops otherwise).
const maxOps = 1 << 22

// classic applies LC_DYLD_INFO: rebase opcodes, then bind, weak bind and lazy bind opcodes
// (lazy ones written only with Options.BindLazy).
func (img *Image) classic(data []byte, di *types.DyldInfoCmd, opt Options) error {
	ops, err := linkedit(data, di.RebaseOff, di.RebaseSize)
	if err != nil {
		return err
	}
	if err := img.rebaseOpcodes(ops); err != nil {
		return fmt.Errorf("rebase opcodes: %w", err)
	}
	for _, st := range []struct {
		name      string
		off, size uint32
		kind      bindKind
	}{
		{"bind", di.BindOff, di.BindSize, bindNow},
		{"weak bind", di.WeakBindOff, di.WeakBindSize, bindWeak},
		{"lazy bind", di.LazyBindOff, di.LazyBindSize, bindLazy},
	} {
		ops, err := linkedit(data, st.off, st.size)
		if err != nil {
			return err
		}
		if err := img.bindOpcodes(ops, st.kind, st.kind != bindLazy || opt.BindLazy); err != nil {
			return fmt.Errorf("%s opcodes: %w", st.name, err)
		}
	}
	return nil
}

// segIndex returns the segment a SET_SEGMENT_AND_OFFSET opcode names.
func (img *Image) segIndex(i uint8) (*seg, error) {
	if int(i) >= len(img.segs) {
		return nil, fmt.Errorf("segment index %d of %d", i, len(img.segs))
	}
	return &img.segs[i], nil
}

var rebaseNames = map[uint8]string{
	types.REBASE_OPCODE_DONE:                               "REBASE_OPCODE_DONE",
	types.REBASE_OPCODE_SET_TYPE_IMM:                       "REBASE_OPCODE_SET_TYPE_IMM",
	types.REBASE_OPCODE_SET_SEGMENT_AND_OFFSET_ULEB:        "REBASE_OPCODE_SET_SEGMENT_AND_OFFSET_ULEB",
	types.REBASE_OPCODE_ADD_ADDR_ULEB:                      "REBASE_OPCODE_ADD_ADDR_ULEB",
	types.REBASE_OPCODE_ADD_ADDR_IMM_SCALED:                "REBASE_OPCODE_ADD_ADDR_IMM_SCALED",
	types.REBASE_OPCODE_DO_REBASE_IMM_TIMES:                "REBASE_OPCODE_DO_REBASE_IMM_TIMES",
	types.REBASE_OPCODE_DO_REBASE_ULEB_TIMES:               "REBASE_OPCODE_DO_REBASE_ULEB_TIMES",
	types.REBASE_OPCODE_DO_REBASE_ADD_ADDR_ULEB:            "REBASE_OPCODE_DO_REBASE_ADD_ADDR_ULEB",
	types.REBASE_OPCODE_DO_REBASE_ULEB_TIMES_SKIPPING_ULEB: "REBASE_OPCODE_DO_REBASE_ULEB_TIMES_SKIPPING_ULEB",
}

func (img *Image) rebaseOpcodes(ops []byte) error {
	r := &opReader{b: ops}
	var s *seg
	var off uint64
	typ := uint8(types.REBASE_TYPE_POINTER)
	n := 0
	do := func() error {
		if s == nil {
			return errors.New("rebase before a segment")
		}
		if typ != types.REBASE_TYPE_POINTER {
			return fmt.Errorf("rebase type %d in a 64-bit image", typ)
		}
		if n++; n > maxOps {
			return errors.New("too many rebases")
		}
		b, err := img.word(s.addr+off, s)
		if err != nil {
			return err
		}
		err = img.rebase(s.addr+off, s, binary.LittleEndian.Uint64(b))
		off += 8
		return err
	}
	for r.p < len(ops) {
		op, imm := ops[r.p]&types.REBASE_OPCODE_MASK, ops[r.p]&types.REBASE_IMMEDIATE_MASK
		r.p++
		img.stats[rebaseNames[op]]++
		var err error
		switch op {
		case types.REBASE_OPCODE_DONE:
			return nil
		case types.REBASE_OPCODE_SET_TYPE_IMM:
			typ = imm
		case types.REBASE_OPCODE_SET_SEGMENT_AND_OFFSET_ULEB:
			if s, err = img.segIndex(imm); err == nil {
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
				if err = do(); err == nil {
					off += skip
				}
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

var bindNames = map[uint8]string{
	types.BIND_OPCODE_DONE:                             "BIND_OPCODE_DONE",
	types.BIND_OPCODE_SET_DYLIB_ORDINAL_IMM:            "BIND_OPCODE_SET_DYLIB_ORDINAL_IMM",
	types.BIND_OPCODE_SET_DYLIB_ORDINAL_ULEB:           "BIND_OPCODE_SET_DYLIB_ORDINAL_ULEB",
	types.BIND_OPCODE_SET_DYLIB_SPECIAL_IMM:            "BIND_OPCODE_SET_DYLIB_SPECIAL_IMM",
	types.BIND_OPCODE_SET_SYMBOL_TRAILING_FLAGS_IMM:    "BIND_OPCODE_SET_SYMBOL_TRAILING_FLAGS_IMM",
	types.BIND_OPCODE_SET_TYPE_IMM:                     "BIND_OPCODE_SET_TYPE_IMM",
	types.BIND_OPCODE_SET_ADDEND_SLEB:                  "BIND_OPCODE_SET_ADDEND_SLEB",
	types.BIND_OPCODE_SET_SEGMENT_AND_OFFSET_ULEB:      "BIND_OPCODE_SET_SEGMENT_AND_OFFSET_ULEB",
	types.BIND_OPCODE_ADD_ADDR_ULEB:                    "BIND_OPCODE_ADD_ADDR_ULEB",
	types.BIND_OPCODE_DO_BIND:                          "BIND_OPCODE_DO_BIND",
	types.BIND_OPCODE_DO_BIND_ADD_ADDR_ULEB:            "BIND_OPCODE_DO_BIND_ADD_ADDR_ULEB",
	types.BIND_OPCODE_DO_BIND_ADD_ADDR_IMM_SCALED:      "BIND_OPCODE_DO_BIND_ADD_ADDR_IMM_SCALED",
	types.BIND_OPCODE_DO_BIND_ULEB_TIMES_SKIPPING_ULEB: "BIND_OPCODE_DO_BIND_ULEB_TIMES_SKIPPING_ULEB",
	types.BIND_OPCODE_THREADED:                         "BIND_OPCODE_THREADED",
}

// bindOpcodes runs a bind, weak-bind or lazy-bind stream. In a weak-bind stream every bind
// has the weak ordinal; a lazy-bind stream is a run of entries each ending in DONE.
// BIND_OPCODE_THREADED (arm64e before chained fixups) turns DO_BIND into "add to the ordinal
// table" and applies DYLD_CHAINED_PTR_ARM64E chains that start at the current address.
func (img *Image) bindOpcodes(ops []byte, kind bindKind, write bool) error {
	r := &opReader{b: ops}
	var (
		s        *seg
		off      uint64
		ordinal  int
		sym      string
		addend   int64
		typ      = uint8(types.BIND_TYPE_POINTER)
		n        int
		threaded bool
		table    []chainedImport
	)
	do := func() error {
		if n++; n > maxOps {
			return errors.New("too many binds")
		}
		if threaded {
			if len(table) >= cap(table) {
				return errors.New("threaded bind past the ordinal table's size")
			}
			table = append(table, chainedImport{ordinal: ordinal, name: sym, addend: addend})
			return nil
		}
		if s == nil {
			return errors.New("bind before a segment")
		}
		if typ != types.BIND_TYPE_POINTER {
			return fmt.Errorf("bind type %d in a 64-bit image", typ)
		}
		ord := ordinal
		if kind == bindWeak {
			ord = -3
		}
		err := img.bind(s.addr+off, s, ord, sym, addend, kind, write, nil)
		off += 8
		return err
	}
	for r.p < len(ops) {
		op, imm := ops[r.p]&types.BIND_OPCODE_MASK, ops[r.p]&types.BIND_IMMEDIATE_MASK
		r.p++
		img.stats[bindNames[op]]++
		var err error
		switch op {
		case types.BIND_OPCODE_DONE:
			if kind != bindLazy {
				return nil
			}
		case types.BIND_OPCODE_SET_DYLIB_ORDINAL_IMM:
			ordinal = int(imm)
		case types.BIND_OPCODE_SET_DYLIB_ORDINAL_ULEB:
			var v uint64
			v, err = r.uleb()
			if v > 1<<16 {
				err = fmt.Errorf("library ordinal %d", v)
			}
			ordinal = int(v)
		case types.BIND_OPCODE_SET_DYLIB_SPECIAL_IMM:
			ordinal = 0
			if imm != 0 {
				ordinal = int(int8(types.BIND_OPCODE_MASK | imm)) // sign-extended: -1, -2, -3
			}
		case types.BIND_OPCODE_SET_SYMBOL_TRAILING_FLAGS_IMM:
			e := bytes.IndexByte(ops[r.p:], 0)
			if e < 0 {
				return errors.New("unterminated symbol name")
			}
			sym = string(ops[r.p : r.p+e])
			r.p += e + 1
		case types.BIND_OPCODE_SET_TYPE_IMM:
			typ = imm
		case types.BIND_OPCODE_SET_ADDEND_SLEB:
			addend, err = r.sleb()
		case types.BIND_OPCODE_SET_SEGMENT_AND_OFFSET_ULEB:
			if s, err = img.segIndex(imm); err == nil {
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
				if err = do(); err == nil {
					off += skip
				}
			}
		case types.BIND_OPCODE_THREADED:
			switch imm {
			case types.BIND_SUBOPCODE_THREADED_SET_BIND_ORDINAL_TABLE_SIZE_ULEB:
				var c uint64
				if c, err = r.uleb(); err == nil && c > 1<<16 {
					err = fmt.Errorf("threaded ordinal table of %d", c)
				}
				threaded, table = true, make([]chainedImport, 0, c)
				img.stats["BIND_SUBOPCODE_THREADED_SET_BIND_ORDINAL_TABLE_SIZE_ULEB"]++
			case types.BIND_SUBOPCODE_THREADED_APPLY:
				img.stats["BIND_SUBOPCODE_THREADED_APPLY"]++
				if s == nil {
					return errors.New("threaded apply before a segment")
				}
				err = img.walkChain(s.addr+off, s, ptrArm64e, table)
			default:
				err = fmt.Errorf("unknown threaded bind subopcode %d", imm)
			}
		default:
			err = fmt.Errorf("unknown bind opcode %#x", op)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
