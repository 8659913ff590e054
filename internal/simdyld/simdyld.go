//go:build linux

package simdyld

// The package's API (Options, Image, Bind, Segment, Load) and the loader's steps in order:
// slice, read the load commands, map, fix up, protect (fat.go, loads.go, segments.go, fixup.go,
// protect.go).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"syscall"
	"unsafe"
)

// Options selects what Load does.
type Options struct {
	// Arch is the slice to load from a universal file ("arm64", "arm64e", "x86_64",
	// "x86_64h"); "" loads the only slice (a thin file, or a universal file of one slice).
	// For a thin file a non-empty Arch must name the file's own architecture.
	Arch string
	// Slide is the slide to load at: the mach header lands at __TEXT's vmaddr + Slide. It
	// must be a multiple of the host page size and leave the range free. 0 lets mmap place
	// the image, which gives a random, page-aligned, non-zero slide.
	Slide uint64
	// BindLazy binds lazy pointers too, as after their first call. When false they keep
	// pointing at the (rebased) stub helper, as dyld leaves them until the first call.
	BindLazy bool
}

// AuthInfo is how an arm64e chained pointer asks to be signed, as encoded in the pointer.
// The simulated dyld cannot sign on this host, so it writes the plain value and records this.
type AuthInfo struct {
	Key       uint8 // 0 IA, 1 IB, 2 DA, 3 DB
	AddrDiv   bool  // blend the slot's address into the discriminator
	Diversity uint16
}

// Bind is one bound pointer location.
type Bind struct {
	Addr   uint64 // slid address of the pointer in this process
	Symbol string // as in the image's imports, e.g. "_objc_msgSend"
	// Library is the install path of the dylib the symbol is imported from, or for the
	// special ordinals "this-image" (0), "main-executable" (-1), "flat-namespace" (-2) and
	// "weak" (-3, and every entry of a classic weak-bind table).
	Library string
	// Value is FakeAddress(Library, Symbol) + addend: what is written there. A lazy bind left
	// unbound (Options.BindLazy false) is recorded with the value it would get, but the slot
	// keeps its stub-helper pointer; a classic weak bind at a slot that a regular bind
	// already filled is not written (the import stands, as when no image overrides it).
	Value uint64
	Lazy  bool      // from the classic lazy-bind table
	Weak  bool      // classic weak-bind table entry, or chained import with the weak ordinal
	Auth  *AuthInfo // arm64e authenticated bind; nil otherwise
}

// Segment is one mapped segment.
type Segment struct {
	Name       string
	Addr, Size uint64 // slid address; size rounded up to the host page
	Prot       int    // syscall.PROT_READ|PROT_WRITE|PROT_EXEC as mapped after load
}

// Image is a Mach-O image mapped by Load.
type Image struct {
	Path, Arch string
	Header     uintptr // address of the mapped mach header: Slide + __TEXT vmaddr
	Slide      uintptr // Header - __TEXT vmaddr
	Segments   []Segment
	Binds      []Bind
	Rebases    []uint64          // slid addresses of rebased pointers
	Fake       map[string]uint64 // library+"\x00"+symbol -> FakeAddress(library, symbol)

	mem    []byte // the reservation: every mapped segment, from base
	base   uint64 // lowest mapped unslid vmaddr
	dylibs []string
	segs   []seg // load-command order, __PAGEZERO included (ordinals index this)
	text   uint64
	stats  map[string]int // opcodes and pointer formats met, for tests

	fakeOf  map[uint64]string // FakeAddress -> library+"\x00"+symbol, to catch collisions
	regular map[uint64]bool   // slid addresses a regular (non-lazy, non-weak) bind wrote
	fixups  int               // rebases and binds applied, bounded by maxFixups
}

// maxFixups bounds the rebases and binds an image may apply: two per pointer slot (a bind
// over a rebase, a weak bind over a bind), so that malformed opcode streams that bind one
// slot over and over cannot exhaust memory.
func (img *Image) maxFixups() int { return len(img.mem)/4 + 64 }

// count counts one fixup against the bound.
func (img *Image) count() error {
	if img.fixups++; img.fixups > img.maxFixups() {
		return fmt.Errorf("more than %d fixups in a %#x-byte image", img.maxFixups(), len(img.mem))
	}
	return nil
}

// seg is a segment load command.
type seg struct {
	name                     string
	addr, memsz, off, filesz uint64
	initprot, flags          uint32
}

const sgReadOnly = 0x10 // SG_READ_ONLY: read-only after fixups

// FakeAddress is the address the simulated dyld binds an import to: deterministic, unique
// per library and symbol (to 37 bits of hash), 16-byte aligned, in 0x7e00_0000_0000 |
// hash<<4, a range no mapping here uses.
func FakeAddress(library, symbol string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(library))
	h.Write([]byte{0})
	h.Write([]byte(symbol))
	return 0x7e00_0000_0000 | (h.Sum64()&(1<<37-1))<<4
}

// Bytes returns the live mapping: every segment but __PAGEZERO, from the lowest address,
// with the gaps between segments (if any, read-only).
func (img *Image) Bytes() []byte { return img.mem }

// Close unmaps the image.
func (img *Image) Close() error {
	if img.mem == nil {
		return nil
	}
	_, _, e := syscall.Syscall(syscall.SYS_MUNMAP, uintptr(unsafe.Pointer(&img.mem[0])), uintptr(len(img.mem)), 0)
	img.mem = nil
	if e != 0 {
		return e
	}
	return nil
}

// Load maps the Mach-O image at path as dyld would and applies its fixups. Malformed input
// gives an error, never a panic.
func Load(path string, opt Options) (img *Image, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil { // a go-macho or decoding bug: report it, do not crash the test binary
			if img != nil {
				img.Close()
			}
			img, err = nil, fmt.Errorf("simdyld %s: panic: %v", path, r)
		}
	}()
	img, err = load(data, opt)
	if err != nil {
		return nil, fmt.Errorf("simdyld %s: %w", path, err)
	}
	img.Path = path
	return img, nil
}

// load is Load on the file's bytes, without the panic guard (fuzzing wants to see panics).
func load(file []byte, opt Options) (*Image, error) {
	data, arch, err := slice(file, opt.Arch)
	if err != nil {
		return nil, err
	}
	if len(data) < 32 || binary.LittleEndian.Uint32(data) != 0xfeedfacf {
		return nil, errors.New("not a 64-bit little-endian Mach-O image")
	}
	switch ft := binary.LittleEndian.Uint32(data[12:]); ft {
	case 2, 6, 8: // MH_EXECUTE, MH_DYLIB, MH_BUNDLE
	default:
		return nil, fmt.Errorf("file type %d is not loaded by dyld", ft)
	}
	img := &Image{Arch: arch, Fake: map[string]uint64{}, stats: map[string]int{}}
	lc, err := img.readLoads(data)
	if err != nil {
		return nil, err
	}
	if err := img.mapSegments(data, opt.Slide); err != nil {
		return nil, err
	}
	if err := img.fixup(lc, data, opt); err != nil {
		img.Close()
		return nil, err
	}
	if err := img.protect(); err != nil {
		img.Close()
		return nil, err
	}
	return img, nil
}
