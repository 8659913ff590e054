//go:build linux

package simdyld

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/blacktop/go-macho/types"
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

// archName names a CPU type and subtype as Apple's tools do.
func archName(cpu, sub uint32) string {
	sub &= 0x00ff_ffff // capability bits (arm64e ABI version) are not part of the name
	switch cpu {
	case 0x0100_000c: // CPU_TYPE_ARM64
		if sub == 2 {
			return "arm64e"
		}
		return "arm64"
	case 0x0100_0007: // CPU_TYPE_X86_64
		if sub == 8 {
			return "x86_64h"
		}
		return "x86_64"
	case 0x0200_000c:
		return "arm64_32"
	case 12:
		return "arm"
	case 7:
		return "i386"
	}
	return fmt.Sprintf("cpu%#x", cpu)
}

// slice returns the bytes of the wanted slice and its architecture name.
func slice(data []byte, arch string) ([]byte, string, error) {
	if len(data) < 8 {
		return nil, "", errors.New("too short for a Mach-O file")
	}
	be := binary.BigEndian
	magic := be.Uint32(data)
	if magic != 0xcafebabe && magic != 0xcafebabf {
		if len(data) < 12 {
			return nil, "", errors.New("too short for a Mach-O header")
		}
		le := binary.LittleEndian
		name := archName(le.Uint32(data[4:]), le.Uint32(data[8:]))
		if arch != "" && arch != name {
			return nil, "", fmt.Errorf("thin %s file has no %q slice", name, arch)
		}
		return data, name, nil
	}
	n := uint64(be.Uint32(data[4:]))
	width := uint64(20)
	if magic == 0xcafebabf {
		width = 32
	}
	if 8+n*width > uint64(len(data)) {
		return nil, "", fmt.Errorf("universal header of %d slices past the file", n)
	}
	var names []string
	type sl struct{ off, size uint64 }
	found := map[string]sl{}
	for i := uint64(0); i < n; i++ {
		e := data[8+i*width:]
		var s sl
		if width == 20 {
			s = sl{uint64(be.Uint32(e[8:])), uint64(be.Uint32(e[12:]))}
		} else {
			s = sl{be.Uint64(e[8:]), be.Uint64(e[16:])}
		}
		name := archName(be.Uint32(e), be.Uint32(e[4:]))
		if s.off > uint64(len(data)) || s.size > uint64(len(data))-s.off {
			return nil, "", fmt.Errorf("%s slice [%#x,+%#x) past the file", name, s.off, s.size)
		}
		names = append(names, name)
		found[name] = s
	}
	if arch == "" {
		if len(names) != 1 {
			return nil, "", fmt.Errorf("universal file of %d slices (%s): Options.Arch must name one", len(names), strings.Join(names, ", "))
		}
		arch = names[0]
	}
	s, ok := found[arch]
	if !ok {
		return nil, "", fmt.Errorf("universal file has no %q slice (has %s)", arch, strings.Join(names, ", "))
	}
	return data[s.off : s.off+s.size], arch, nil
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

// mapped reports whether a segment occupies memory (not __PAGEZERO, not empty).
func (s *seg) mapped() bool { return s.name != "__PAGEZERO" && s.memsz != 0 }

const mapFixedNoReplace = 0x100000 // MAP_FIXED_NOREPLACE (Linux 4.17)

// mapSegments reserves one region for the vmaddr span of the mapped segments and copies each
// segment's file bytes in; the rest stays zero.
func (img *Image) mapSegments(data []byte, slide uint64) error {
	ps := uint64(os.Getpagesize())
	lo, hi := ^uint64(0), uint64(0)
	haveText := false
	for _, s := range img.segs {
		if !s.mapped() {
			continue
		}
		if s.addr+s.memsz < s.addr {
			return fmt.Errorf("segment %s wraps around", s.name)
		}
		if s.name == "__TEXT" {
			img.text, haveText = s.addr, true
		}
		lo, hi = min(lo, s.addr), max(hi, s.addr+s.memsz)
	}
	if !haveText {
		return errors.New("no __TEXT segment")
	}
	if hi-lo > 1<<34 {
		return fmt.Errorf("segments span %#x bytes", hi-lo)
	}
	for _, s := range img.segs {
		if s.mapped() && (s.addr-lo)%ps != 0 {
			return fmt.Errorf("segment %s at %#x is not aligned to this host's %#x-byte pages", s.name, s.addr, ps)
		}
	}
	size := (hi - lo + ps - 1) &^ (ps - 1)
	var want uintptr
	flags := uintptr(syscall.MAP_PRIVATE | syscall.MAP_ANONYMOUS)
	if slide != 0 {
		if slide%ps != 0 || lo+slide < lo {
			return fmt.Errorf("slide %#x is not a usable page multiple", slide)
		}
		want = uintptr(lo + slide)
		flags |= mapFixedNoReplace
	}
	for try := 0; ; try++ {
		p, _, e := syscall.Syscall6(syscall.SYS_MMAP, want, uintptr(size), syscall.PROT_READ|syscall.PROT_WRITE, flags, ^uintptr(0), 0)
		if e != 0 {
			return fmt.Errorf("mmap %#x bytes at %#x: %w", size, want, e)
		}
		// p is memory outside Go's heap; the conversion through a pointer keeps vet quiet.
		img.mem = unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), size)
		if want != 0 && p != want { // a kernel without MAP_FIXED_NOREPLACE took it as a hint
			img.Close()
			return fmt.Errorf("cannot map at slide %#x: the range is taken", slide)
		}
		if uint64(p) != lo || try > 2 { // slide 0 would hide missing rebases: never use it
			break
		}
		defer syscall.Syscall(syscall.SYS_MUNMAP, p, uintptr(size), 0) // keep the spot taken while retrying
	}
	img.base = lo
	start := uint64(uintptr(unsafe.Pointer(&img.mem[0])))
	img.Slide = uintptr(start - lo)
	img.Header = uintptr(start - lo + img.text)
	if img.Slide == 0 {
		img.Close()
		return errors.New("mmap keeps placing the image at slide 0")
	}
	for _, s := range img.segs {
		if !s.mapped() {
			continue
		}
		n := min(s.filesz, s.memsz) // Go's __DWARF has file bytes but no VM size: not mapped
		if s.off > uint64(len(data)) || n > uint64(len(data))-s.off {
			img.Close()
			return fmt.Errorf("segment %s file range [%#x,+%#x) past the file", s.name, s.off, n)
		}
		copy(img.mem[s.addr-lo:], data[s.off:s.off+n])
	}
	return nil
}

// word returns the 8 bytes of the mapping at an unslid address, which must lie in segment s
// (or, with s nil, anywhere in the mapping).
func (img *Image) word(vmaddr uint64, s *seg) ([]byte, error) {
	if s != nil && (vmaddr < s.addr || vmaddr-s.addr > s.memsz || s.memsz-(vmaddr-s.addr) < 8) {
		return nil, fmt.Errorf("fixup at %#x outside segment %s", vmaddr, s.name)
	}
	if vmaddr < img.base || vmaddr-img.base > uint64(len(img.mem)) || uint64(len(img.mem))-(vmaddr-img.base) < 8 {
		return nil, fmt.Errorf("fixup at %#x outside the image", vmaddr)
	}
	return img.mem[vmaddr-img.base:][:8], nil
}

// segmentAt returns the mapped segment holding an unslid address.
func (img *Image) segmentAt(vmaddr uint64) *seg {
	for i := range img.segs {
		s := &img.segs[i]
		if s.mapped() && vmaddr >= s.addr && vmaddr-s.addr < s.memsz {
			return s
		}
	}
	return nil
}

// library names an ordinal as dyld resolves it.
func (img *Image) library(ordinal int) (string, error) {
	switch ordinal {
	case 0:
		return "this-image", nil
	case -1:
		return "main-executable", nil
	case -2:
		return "flat-namespace", nil
	case -3:
		return "weak", nil
	}
	if ordinal >= 1 && ordinal <= len(img.dylibs) {
		return img.dylibs[ordinal-1], nil
	}
	return "", fmt.Errorf("library ordinal %d (the image links %d)", ordinal, len(img.dylibs))
}

// rebase writes target + slide at an unslid address in segment s.
func (img *Image) rebase(vmaddr uint64, s *seg, target uint64) error {
	b, err := img.word(vmaddr, s)
	if err != nil {
		return err
	}
	if err := img.count(); err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(b, target+uint64(img.Slide))
	img.Rebases = append(img.Rebases, vmaddr+uint64(img.Slide))
	return nil
}

// bindKind says how a bind is applied.
type bindKind int

const (
	bindNow  bindKind = iota // regular: written
	bindLazy                 // lazy: written only with Options.BindLazy
	bindWeak                 // classic weak-bind table: written unless a regular bind is there
)

// bind binds an unslid address in segment s to FakeAddress(library, sym) + addend.
func (img *Image) bind(vmaddr uint64, s *seg, ordinal int, sym string, addend int64, kind bindKind, write bool, auth *AuthInfo) error {
	b, err := img.word(vmaddr, s)
	if err != nil {
		return err
	}
	lib, err := img.library(ordinal)
	if err != nil {
		return err
	}
	if sym == "" {
		return fmt.Errorf("bind at %#x without a symbol", vmaddr)
	}
	if err := img.count(); err != nil {
		return err
	}
	fake := FakeAddress(lib, sym)
	key := lib + "\x00" + sym
	if _, ok := img.Fake[key]; !ok {
		if img.fakeOf == nil {
			img.fakeOf = map[uint64]string{}
		}
		if k, dup := img.fakeOf[fake]; dup {
			return fmt.Errorf("fake addresses of %q and %q collide", k, key)
		}
		img.Fake[key], img.fakeOf[fake] = fake, key
	}
	v := uint64(int64(fake) + addend)
	addr := vmaddr + uint64(img.Slide)
	switch {
	case kind == bindWeak && img.regular[addr]:
		write = false
	case kind == bindNow && ordinal != -3:
		if img.regular == nil {
			img.regular = map[uint64]bool{}
		}
		img.regular[addr] = true
	}
	if write {
		binary.LittleEndian.PutUint64(b, v)
	}
	img.Binds = append(img.Binds, Bind{Addr: addr, Symbol: sym, Library: lib, Value: v,
		Lazy: kind == bindLazy, Weak: kind == bindWeak || ordinal == -3, Auth: auth})
	return nil
}

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

// fixup applies LC_DYLD_CHAINED_FIXUPS or else LC_DYLD_INFO(_ONLY); an image with neither is
// bound as Mac OS X 10.5's dyld did, from the indirect symbol table (indirect.go).
func (img *Image) fixup(fx *fixups, data []byte, opt Options) error {
	switch {
	case fx.chained != nil:
		img.stats["LC_DYLD_CHAINED_FIXUPS"]++
		return img.chained(data, fx.chained[0], fx.chained[1])
	case fx.info != nil:
		img.stats[fx.infoOnlyName]++
		return img.classic(data, fx.info, opt)
	case len(fx.ptrSecs) > 0:
		img.stats["indirect symbol table"]++
		return img.indirect(data, fx, opt)
	}
	return nil
}

// protect gives each segment dyld's final protection: its initprot, except that SG_READ_ONLY
// segments and __DATA_CONST / __AUTH_CONST become read-only after fixups. Gaps between
// segments (dyld leaves them unmapped) are made read-only, so that Bytes can be read whole.
func (img *Image) protect() error {
	ps := uint64(os.Getpagesize())
	if err := mprotect(img.mem, syscall.PROT_READ); err != nil {
		return fmt.Errorf("mprotect gaps: %w", err)
	}
	for _, s := range img.segs {
		if !s.mapped() {
			continue
		}
		prot := int(s.initprot) & (syscall.PROT_READ | syscall.PROT_WRITE | syscall.PROT_EXEC)
		if s.name == "__DATA_CONST" || s.name == "__AUTH_CONST" || s.flags&sgReadOnly != 0 {
			prot = syscall.PROT_READ
		}
		off := s.addr - img.base
		n := (s.memsz + ps - 1) &^ (ps - 1)
		if err := mprotect(img.mem[off:off+n], prot); err != nil {
			return fmt.Errorf("mprotect %s: %w", s.name, err)
		}
		img.Segments = append(img.Segments, Segment{Name: s.name, Addr: s.addr + uint64(img.Slide), Size: n, Prot: prot})
	}
	return nil
}

func mprotect(b []byte, prot int) error {
	_, _, e := syscall.Syscall(syscall.SYS_MPROTECT, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(prot))
	if e != 0 {
		return e
	}
	return nil
}

// CurrentProtections reads the segments' protections back from /proc/self/maps. A segment
// whose pages do not all have the same protection is an error.
func (img *Image) CurrentProtections() ([]Segment, error) {
	maps, err := readMaps()
	if err != nil {
		return nil, err
	}
	var out []Segment
	for _, s := range img.Segments {
		prot, covered := -1, s.Addr
		for _, m := range maps {
			if m.hi <= s.Addr || m.lo >= s.Addr+s.Size {
				continue
			}
			if m.lo > covered {
				return nil, fmt.Errorf("%s: %#x not mapped", s.Name, covered)
			}
			if prot >= 0 && m.prot != prot {
				return nil, fmt.Errorf("%s: pages mapped %s and %s", s.Name, protString(prot), protString(m.prot))
			}
			prot, covered = m.prot, m.hi
		}
		if covered < s.Addr+s.Size {
			return nil, fmt.Errorf("%s: %#x not mapped", s.Name, covered)
		}
		out = append(out, Segment{Name: s.Name, Addr: s.Addr, Size: s.Size, Prot: prot})
	}
	return out, nil
}

type mapping struct {
	lo, hi uint64
	prot   int
}

// readMaps lists this process's mappings, in address order.
func readMaps() ([]mapping, error) {
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || len(f[1]) < 3 {
			continue
		}
		rng, perms := f[0], f[1]
		i := strings.IndexByte(rng, '-')
		if i < 0 {
			continue
		}
		lo, err1 := strconv.ParseUint(rng[:i], 16, 64)
		hi, err2 := strconv.ParseUint(rng[i+1:], 16, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("/proc/self/maps: bad line %q", sc.Text())
		}
		p := 0
		if perms[0] == 'r' {
			p |= syscall.PROT_READ
		}
		if perms[1] == 'w' {
			p |= syscall.PROT_WRITE
		}
		if perms[2] == 'x' {
			p |= syscall.PROT_EXEC
		}
		out = append(out, mapping{lo, hi, p})
	}
	return out, sc.Err()
}

// protString renders PROT_* bits as /proc/self/maps does ("r-x").
func protString(p int) string {
	b := []byte("---")
	if p&syscall.PROT_READ != 0 {
		b[0] = 'r'
	}
	if p&syscall.PROT_WRITE != 0 {
		b[1] = 'w'
	}
	if p&syscall.PROT_EXEC != 0 {
		b[2] = 'x'
	}
	return string(b)
}
