package machobind

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/blacktop/go-macho/types"
)

// boundSym is what dyld's classic bind opcodes bind at one address.
type boundSym struct {
	name    []byte // aliases __LINKEDIT
	ordinal int
	weak    bool // BIND_SYMBOL_FLAGS_WEAK_IMPORT
	lazy    bool
	// linked is, for a weak-coalesced slot (ordinal WeakLookupOrdinal), the ordinal of the
	// regular (or lazy) bind at the same slot, or noLinkedOrdinal when no such bind exists.
	linked int
}

// noLinkedOrdinal marks a weak-bind entry without a regular bind at the same slot.
const noLinkedOrdinal = -1 << 30

// maxBinds bounds the binds one image's opcodes may produce: real images stay far below it, a
// hostile DO_BIND_ULEB_TIMES stops here instead of looping for hours.
const maxBinds = 1 << 24

var errTooManyBinds = errors.New("bind opcodes produce more than 16M binds")

func uleb(b []byte, p *int) (uint64, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if *p >= len(b) {
			return 0, errors.New("ULEB128 runs past the end of the opcodes")
		}
		c := b[*p]
		*p++
		if shift < 64 {
			v |= uint64(c&0x7f) << shift
		}
		if c&0x80 == 0 {
			return v, nil
		}
		if shift > 70 {
			return 0, errors.New("ULEB128 longer than 10 bytes")
		}
	}
}

func sleb(b []byte, p *int) (int64, error) {
	var v int64
	var shift uint
	for {
		if *p >= len(b) {
			return 0, errors.New("SLEB128 runs past the end of the opcodes")
		}
		c := b[*p]
		*p++
		if shift < 64 {
			v |= int64(c&0x7f) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, nil
		}
		if shift > 70 {
			return 0, errors.New("SLEB128 longer than 10 bytes")
		}
	}
}

// runBindOpcodes interprets one classic bind stream (bind, weak bind or lazy bind) and calls
// bind for each bound address. Every address is checked against its segment.
func (img *Image) runBindOpcodes(ops []byte, lazy bool, bind func(addr uint64, s boundSym)) error {
	var (
		cur    boundSym
		seg    *Segment
		offset uint64
		count  int
	)
	cur.lazy, cur.linked = lazy, noLinkedOrdinal
	pw := img.pointerWidth
	do := func() error {
		if seg == nil {
			return errors.New("bind before SET_SEGMENT_AND_OFFSET")
		}
		if offset >= seg.Memsz || seg.Memsz-offset < pw {
			return fmt.Errorf("bind at %s+%#x, past the segment's %#x bytes", seg.Name, offset, seg.Memsz)
		}
		if count++; count > maxBinds {
			return errTooManyBinds
		}
		bind(seg.Addr+offset, cur)
		return nil
	}
	for p := 0; p < len(ops); {
		op, imm := ops[p]&types.BIND_OPCODE_MASK, ops[p]&types.BIND_IMMEDIATE_MASK
		at := p
		p++
		var err error
		switch op {
		case types.BIND_OPCODE_DONE:
			if !lazy {
				return nil
			}
			// lazy binding info separates its entries with DONE
		case types.BIND_OPCODE_SET_DYLIB_ORDINAL_IMM:
			cur.ordinal = int(imm)
		case types.BIND_OPCODE_SET_DYLIB_ORDINAL_ULEB:
			var v uint64
			v, err = uleb(ops, &p)
			cur.ordinal = int(min(v, 1<<20))
		case types.BIND_OPCODE_SET_DYLIB_SPECIAL_IMM:
			cur.ordinal = 0
			if imm != 0 {
				cur.ordinal = int(int8(0xf0 | imm))
			}
		case types.BIND_OPCODE_SET_SYMBOL_TRAILING_FLAGS_IMM:
			end := bytes.IndexByte(ops[p:min(len(ops), p+maxSymbolName+1)], 0)
			if end < 0 {
				return fmt.Errorf("opcode at %#x: symbol name not terminated within %d bytes", at, maxSymbolName)
			}
			cur.name, cur.weak = ops[p:p+end], imm&types.BIND_SYMBOL_FLAGS_WEAK_IMPORT != 0
			p += end + 1
		case types.BIND_OPCODE_SET_TYPE_IMM:
		case types.BIND_OPCODE_SET_ADDEND_SLEB:
			_, err = sleb(ops, &p)
		case types.BIND_OPCODE_SET_SEGMENT_AND_OFFSET_ULEB:
			if int(imm) >= len(img.Segments) {
				return fmt.Errorf("opcode at %#x: segment %d of %d", at, imm, len(img.Segments))
			}
			seg = img.Segments[imm]
			offset, err = uleb(ops, &p)
		case types.BIND_OPCODE_ADD_ADDR_ULEB:
			var v uint64
			v, err = uleb(ops, &p)
			offset += v
		case types.BIND_OPCODE_DO_BIND:
			err = do()
			offset += pw
		case types.BIND_OPCODE_DO_BIND_ADD_ADDR_ULEB:
			if err = do(); err == nil {
				var v uint64
				v, err = uleb(ops, &p)
				offset += pw + v
			}
		case types.BIND_OPCODE_DO_BIND_ADD_ADDR_IMM_SCALED:
			err = do()
			offset += pw + uint64(imm)*pw
		case types.BIND_OPCODE_DO_BIND_ULEB_TIMES_SKIPPING_ULEB:
			var n, skip uint64
			if n, err = uleb(ops, &p); err == nil {
				skip, err = uleb(ops, &p)
			}
			for i := uint64(0); i < n && err == nil; i++ {
				err = do()
				offset += pw + skip
			}
		case types.BIND_OPCODE_THREADED:
			return fmt.Errorf("opcode at %#x: threaded binds (pre-iOS 13 arm64e) are not supported", at)
		default:
			return fmt.Errorf("opcode at %#x: unknown bind opcode %#x", at, op)
		}
		if err != nil {
			return fmt.Errorf("opcode at %#x: %w", at, err)
		}
	}
	return nil
}

// classicBinds returns what the classic bind, lazy-bind and weak-bind opcodes bind at each
// address inside the given ranges (the symbol-pointer sections), or nil for images without
// LC_DYLD_INFO. This, not the indirect symbol table, is what dyld binds: the two disagree in
// real binaries (zig's linker, Go's linker).
func (img *Image) classicBinds(inRange func(addr uint64) bool) (map[uint64]boundSym, error) {
	if img.dyldInfo == nil {
		return nil, nil
	}
	di := img.dyldInfo
	out := map[uint64]boundSym{}
	streams := []struct {
		what      string
		off, size uint32
		lazy      bool
		weak      bool
	}{
		{"bind info", di.BindOff, di.BindSize, false, false},
		{"lazy bind info", di.LazyBindOff, di.LazyBindSize, true, false},
		{"weak bind info", di.WeakBindOff, di.WeakBindSize, false, true},
	}
	for _, st := range streams {
		ops, err := img.linkeditBytes(st.what, uint64(st.off), uint64(st.size))
		if err != nil {
			return nil, err
		}
		err = img.runBindOpcodes(ops, st.lazy, func(addr uint64, s boundSym) {
			if !inRange(addr) {
				return
			}
			if st.weak {
				// Weak-definition coalescing: dyld binds the regular bind first (if any), then
				// rebinds the slot to the first definition of the symbol among the images with
				// weak definitions, in load order; the regular bind is what stays when none
				// exports it (dyld4 forEachBindUnified_Opcodes: weak binds "override other
				// binds/rebases ... allowed to fail to find a target, in which case the normal
				// rebase/bind will not be overridden"; Loader::resolveSymbol,
				// BIND_SPECIAL_DYLIB_WEAK_LOOKUP). ld64 (650 and 711 seen) may list the same slot
				// twice in both tables: a repeated weak-bind entry (or a regular bind that is
				// itself a weak lookup) passes on the library the regular bind named, never "weak".
				s.linked = noLinkedOrdinal
				if prev, bound := out[addr]; bound {
					s.linked, s.weak = prev.ordinal, prev.weak
					if prev.ordinal == WeakLookupOrdinal {
						s.linked = prev.linked
					}
				}
				s.ordinal = WeakLookupOrdinal
			}
			out[addr] = s
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.what, err)
		}
	}
	return out, nil
}
