package machobind

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"sync"
	"sync/atomic"
)

// Rebinding names an imported symbol and what its slots should point to instead.
type Rebinding struct {
	Name        string  // "objc_msgSend" (C name) or "_objc_msgSend" (symbol-table name); see SymbolKeys
	Replacement uintptr // new target
	// Library, optional, selects the slots by the library dyld binds them from: a dylib's
	// install path or base name ("libobjc.A.dylib"), or a special ordinal's name as
	// LibraryName spells it: "this-image" (0), "main-executable" (-1: a bundle's imports from
	// its -bundle_loader program), "flat-namespace" (-2: the first image in load order that
	// exports the symbol, so no dylib filter selects it) and "weak" (-3: weak-definition
	// coalescing, C++ operator new and the like). A coalesced slot is also selected by the
	// library the static linker found the symbol in (LinkedLibrary), which is where dyld binds
	// it unless an image earlier in load order, the main executable first, defines it too.
	Library string
	// Publish, if set, is called once with the original as soon as it is known and before any
	// slot is changed to the replacement, so that a replacement that forwards to the original
	// (the interposers) can find it from its first call.
	Publish func(original uintptr)
}

// Prot is a page protection: read 1, write 2, execute 4 (PROT_* on Linux, VM_PROT_* on darwin).
type Prot int

// Page protection bits.
const (
	ProtRead  Prot = 1
	ProtWrite Prot = 2
	ProtExec  Prot = 4
)

// AuthInfo is how an arm64e pointer is signed: key (0 IA, 1 IB, 2 DA, 3 DB), whether the slot
// address is blended into the modifier, and the 16-bit extra discriminator.
type AuthInfo struct {
	Key       uint8
	AddrDiv   bool
	Diversity uint16
}

// GOTAuth is how the arm64e ABI signs __auth_got entries: key IA, address-diversified,
// discriminator 0 (the chained auth binds of real arm64e binaries carry exactly this; the
// simulated-dyld test checks it on every arm64e fixture). In memory the chain bits that said
// so were overwritten by dyld, so rebinding relies on this rule.
var GOTAuth = AuthInfo{Key: 0, AddrDiv: true, Diversity: 0}

// Modifier returns the PAC modifier for a pointer stored at slot: the slot address with the
// discriminator in its top 16 bits when address-diversified, else the discriminator alone
// (ptrauth_blend_discriminator).
func (a AuthInfo) Modifier(slot uintptr) uint64 {
	if !a.AddrDiv {
		return uint64(a.Diversity)
	}
	return uint64(slot)&^(0xffff<<48) | uint64(a.Diversity)<<48
}

// Runtime is what rebinding needs from the OS and the dynamic linker. darwin implements it
// with dyld's API; tests implement it over images their simulated dyld mapped.
type Runtime interface {
	// Images lists the images loaded now.
	Images() ([]Loaded, error)
	// Self returns the header address of the image that holds this code, which is never rebound.
	Self() uintptr
	// WatchImages arranges for fn to be called with every image loaded from now on. The
	// Rebinder calls it at most once.
	WatchImages(fn func(Loaded)) error
	// PageSize is the VM page size.
	PageSize() uintptr
	// Protection returns the current protection of the page holding addr.
	Protection(addr uintptr) (Prot, error)
	// Protect sets the protection of [addr, addr+size), both page-aligned.
	Protect(addr, size uintptr, p Prot) error
	// Resolve returns the address a lazily bound symbol will bind to, for slots that dyld has
	// not bound yet (they still point at the image's stub helper).
	Resolve(symbol, library string) (uintptr, error)
	// Strip removes a pointer-authentication signature (identity where there is none).
	Strip(p uintptr) uintptr
	// Sign signs p for storing at slot; only called for auth slots.
	Sign(p, slot uintptr, a AuthInfo) (uintptr, error)
}

// Mapping is one mapping of the process's address space: [Lo, Hi) with its protection.
type Mapping struct {
	Lo, Hi uintptr
	Prot   Prot
}

// MappingLister is an optional part of a Runtime whose Protection has to read every mapping of
// the process to answer for one page (Linux: /proc/self/maps, ~0.3 ms in a process with a
// hundred objects). The Rebinder then reads the mappings once for all the slots it writes at a
// time (every image of a Rebind, one image loaded later, an Undo) instead of once per page:
// between that reading and its writes only its own Protect calls, each undone before the
// next page, change a protection (it holds its lock; before main no other thread maps).
type MappingLister interface {
	// Mappings returns the process's mappings, sorted by address.
	Mappings() ([]Mapping, error)
}

// PageProber is an optional part of a Runtime that can say its Protection answers for one
// page without reading every mapping (Linux 6.11 and later: the PROCMAP_QUERY ioctl, a few
// microseconds a page against ~0.3 ms for /proc/self/maps). The Rebinder then asks page by
// page even when the Runtime is a MappingLister.
type PageProber interface {
	// ProbesPages reports whether Protection asks about one page.
	ProbesPages() bool
}

// protections returns the protection of a page as the Runtime reports it: from Protection each
// time when it answers for one page (PageProber), else from one reading of every mapping,
// taken at the first question, when the Runtime is a MappingLister (a page the reading does
// not cover, mapped since, is asked of Protection), else from Protection each time.
func (r *Rebinder) protections() func(page uintptr) (Prot, error) {
	if pp, ok := r.rt.(PageProber); ok && pp.ProbesPages() {
		return r.rt.Protection
	}
	ml, ok := r.rt.(MappingLister)
	if !ok {
		return r.rt.Protection
	}
	var maps []Mapping
	read := false
	return func(page uintptr) (Prot, error) {
		if !read {
			read = true
			maps, _ = ml.Mappings() // on failure, every page is asked of Protection
		}
		i := sort.Search(len(maps), func(i int) bool { return maps[i].Hi > page })
		if i < len(maps) && maps[i].Lo <= page {
			return maps[i].Prot, nil
		}
		return r.rt.Protection(page)
	}
}

// Rebinder rebinds symbols in the images a Runtime reports. Install, the add-image callback and
// Undo are serialized by its lock.
type Rebinder struct {
	rt       Runtime
	mu       sync.Mutex
	hooks    []*Hook // active hooks that follow images loaded later
	watching bool
	// Skipped collects errors for images loaded later that could not be rebound.
	skipped []error
}

// NewRebinder returns a Rebinder over a Runtime.
func NewRebinder(rt Runtime) *Rebinder { return &Rebinder{rt: rt} }

// Hook is one installed set of rebindings; Undo takes it out.
type Hook struct {
	r       *Rebinder
	rs      []Rebinding
	names   NameSet
	orig    []atomic.Uintptr
	writes  []slotWrite
	skipped []error
	follow  bool // also applies to images loaded later
	undone  bool
	// prefixes of the names, for walks of ELF objects (made at the first, under r.mu)
	prefixes *namePrefixes
}

type slotWrite struct {
	addr     uintptr
	old, new uintptr
	image    string
}

// Original returns what the slots of a rebound name pointed to before, resolved to the real
// function (never a stub helper); 0 when no slot of that name was found.
func (h *Hook) Original(name string) uintptr {
	for _, k := range SymbolKeys(name) {
		if i, ok := h.names[k]; ok {
			return h.orig[i].Load()
		}
	}
	return 0
}

// Slots returns the number of slots the hook changed.
func (h *Hook) Slots() int {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	return len(h.writes)
}

// Skipped lists the images that could not be rebound (malformed, or protection failures),
// each with its reason.
func (h *Hook) Skipped() []error {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	return append([]error(nil), h.skipped...)
}

func (r *Rebinder) newHook(rs []Rebinding) (*Hook, error) {
	if len(rs) == 0 {
		return nil, errors.New("no rebindings given")
	}
	names := make([]string, len(rs))
	for i, x := range rs {
		if x.Name == "" || x.Replacement == 0 {
			return nil, fmt.Errorf("rebinding %d: empty name or zero replacement", i)
		}
		names[i] = x.Name
	}
	return &Hook{r: r, rs: rs, names: NewNameSet(names...), orig: make([]atomic.Uintptr, len(rs))}, nil
}

// watchedImages starts watching for images loaded later (once per Rebinder) and returns the
// images loaded now. The caller holds r.mu.
func (r *Rebinder) watchedImages() ([]Loaded, error) {
	if !r.watching {
		if err := r.rt.WatchImages(r.imageAdded); err != nil {
			return nil, fmt.Errorf("watching for new images: %w", err)
		}
		r.watching = true
	}
	return r.rt.Images()
}

// Rebind rebinds the names in every loaded image except our own, and in every image loaded
// later until Undo. Images that cannot be rebound are skipped and listed by Hook.Skipped; the
// error is for failures of the runtime itself.
func (r *Rebinder) Rebind(rs ...Rebinding) (*Hook, error) {
	h, err := r.newHook(rs)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	imgs, err := r.watchedImages()
	if err != nil {
		return nil, err
	}
	h.follow = true
	self := r.rt.Self()
	// Every image's slots are found (and the originals published) first, then written with
	// one reading of the process's protections.
	var found []imageMatches
	for _, l := range imgs {
		if l.Header == self {
			continue
		}
		if im, err := r.match(h, l); err != nil {
			h.skipped = append(h.skipped, err)
		} else if len(im.ms) > 0 {
			found = append(found, im)
		}
	}
	prot := r.protections()
	for _, im := range found {
		if err := r.write(h, im, prot); err != nil {
			h.skipped = append(h.skipped, fmt.Errorf("image %s: %w", im.l.Name, err))
		}
	}
	r.hooks = append(r.hooks, h)
	return h, nil
}

// RebindSets is Rebind for several sets of rebindings at once, each with a Hook of its own
// (undone on its own; nil for an empty set), in one pass over the images: each image is parsed
// and its relocations walked once for the names of every set, and the process's protections
// are read once. A name may be in one set only.
func (r *Rebinder) RebindSets(sets ...[]Rebinding) ([]*Hook, error) {
	p, err := r.PlanSets(sets...)
	if err != nil {
		return nil, err
	}
	return p.Commit()
}

// Plan is a RebindSets in two steps: PlanSets finds the slots of the images loaded now (the
// walk of their relocations, the long part) and publishes the originals, changing no slot;
// Commit writes them. Between the two the program runs unchanged, on other threads included
// (a launch finds the slots while the libraries initialize); an image loaded in between is
// found by Commit.
type Plan struct {
	r            *Rebinder
	hooks        []*Hook
	comb         *Hook
	all          []Rebinding
	setOf, inSet []int // a rebinding of all: its set, its index there
	found        []imageMatches
	walked       map[uintptr]bool // images matched, by header
	skipped      []error
	committed    bool
}

// PlanSets finds the slots RebindSets would write, now (see Plan).
func (r *Rebinder) PlanSets(sets ...[]Rebinding) (*Plan, error) {
	p := &Plan{r: r, hooks: make([]*Hook, len(sets)), walked: map[uintptr]bool{}}
	seen := map[string]int{}
	for k, rs := range sets {
		if len(rs) == 0 {
			continue
		}
		h, err := r.newHook(rs)
		if err != nil {
			return nil, fmt.Errorf("set %d: %w", k, err)
		}
		for i, x := range rs {
			if j, dup := seen[x.Name]; dup && j != k {
				return nil, fmt.Errorf("set %d: %s is in set %d too", k, x.Name, j)
			}
			seen[x.Name] = k
			p.all = append(p.all, x)
			p.setOf, p.inSet = append(p.setOf, k), append(p.inSet, i)
		}
		h.follow = true
		p.hooks[k] = h
	}
	if len(p.all) == 0 {
		return p, nil
	}
	comb, err := r.newHook(p.all)
	if err != nil {
		return nil, err
	}
	p.comb = comb
	r.mu.Lock()
	defer r.mu.Unlock()
	imgs, err := r.rt.Images()
	if err != nil {
		return nil, err
	}
	p.matchNew(imgs)
	return p, nil
}

// matchNew matches the images not matched yet. The caller holds r.mu.
func (p *Plan) matchNew(imgs []Loaded) {
	self := p.r.rt.Self()
	for _, l := range imgs {
		if l.Header == self || p.walked[l.Header] {
			continue
		}
		p.walked[l.Header] = true
		if im, err := p.r.match(p.comb, l); err != nil {
			p.skipped = append(p.skipped, err)
		} else if len(im.ms) > 0 {
			p.found = append(p.found, im)
		}
	}
}

// Commit writes the planned slots, and those of images loaded since the plan, and returns the
// hooks (one per set; nil for an empty set), which follow the images loaded later. Once.
func (p *Plan) Commit() ([]*Hook, error) {
	if p.committed {
		return nil, errors.New("plan already committed")
	}
	p.committed = true
	if p.comb == nil {
		return p.hooks, nil
	}
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	imgs, err := r.watchedImages()
	if err != nil {
		return nil, err
	}
	// an image unloaded since the plan is left out (its slots are gone with it)
	present := make(map[uintptr]string, len(imgs))
	for _, l := range imgs {
		present[l.Header] = l.Name
	}
	kept := p.found[:0]
	for _, im := range p.found {
		if name, ok := present[im.l.Header]; ok && name == im.l.Name {
			kept = append(kept, im)
		}
	}
	p.found = kept
	p.matchNew(imgs)
	skip := func(err error) {
		for _, h := range p.hooks {
			if h != nil {
				h.skipped = append(h.skipped, err)
			}
		}
	}
	for _, err := range p.skipped {
		skip(err)
	}
	prot := r.protections()
	for _, im := range p.found {
		key := imageKey(im.l)
		err := r.writeSlots(im.ms, prot, func(m match) (uintptr, error) {
			v := p.all[m.index].Replacement
			if m.slot.Kind == KindAuth {
				return r.rt.Sign(v, m.addr, GOTAuth)
			}
			return v, nil
		}, func(m match, old, new uintptr) {
			h := p.hooks[p.setOf[m.index]]
			h.writes = append(h.writes, slotWrite{addr: m.addr, old: old, new: new, image: key})
		})
		if err != nil {
			skip(fmt.Errorf("image %s: %w", im.l.Name, err))
		}
	}
	for i := range p.all {
		p.hooks[p.setOf[i]].orig[p.inSet[i]].Store(p.comb.orig[i].Load())
	}
	for _, h := range p.hooks {
		if h != nil {
			r.hooks = append(r.hooks, h)
		}
	}
	return p.hooks, nil
}

// RebindImage rebinds the names in one image only.
func (r *Rebinder) RebindImage(l Loaded, rs ...Rebinding) (*Hook, error) {
	h, err := r.newHook(rs)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.apply(h, l); err != nil {
		return nil, err
	}
	return h, nil
}

// imageAdded is the add-image callback: every following hook is applied to the new image.
func (r *Rebinder) imageAdded(l Loaded) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.Header == r.rt.Self() {
		return
	}
	for _, h := range r.hooks {
		if h.undone || !h.follow || h.covers(l) {
			continue
		}
		if err := r.apply(h, l); err != nil {
			h.skipped = append(h.skipped, err)
		}
	}
}

// covers reports whether the hook already rebound slots of an image (dyld reports every
// image already loaded when a callback is registered).
func (h *Hook) covers(l Loaded) bool {
	for _, w := range h.writes {
		if w.image == imageKey(l) {
			return true
		}
	}
	return false
}

func imageKey(l Loaded) string { return fmt.Sprintf("%s@%#x", l.Name, l.Header) }

// libraryMatches reports whether a rebinding's library filter accepts a slot (see
// Rebinding.Library).
func libraryMatches(filter string, img loadedImage, s *Slot) bool {
	if filter == "" {
		return true
	}
	is := func(lib string) bool { return filter == lib || filter == path.Base(lib) }
	if is(img.LibraryName(s.Ordinal)) {
		return true
	}
	return s.Ordinal == WeakLookupOrdinal && s.LinkedOrdinal != noLinkedOrdinal && is(img.LibraryName(s.LinkedOrdinal))
}

type match struct {
	slot  Slot
	index int // into the hook's rebindings
	addr  uintptr
}

// loadedImage is a parsed image in this process, Mach-O or ELF.
type loadedImage interface {
	WalkSlots(visit SlotVisitor) error
	LibraryName(ordinal int) string
	// ownCode is the unslid range of the image's own code, where an unbound lazy slot points
	// (dyld's stub helper, an ELF PLT).
	ownCode() (lo, hi uint64)
}

func (img *Image) ownCode() (uint64, uint64) {
	if t := img.segmentNamed("__TEXT"); t != nil {
		return t.Addr, t.Addr + t.Memsz
	}
	return 0, 0
}

func parseLoaded(l Loaded) (loadedImage, error) {
	if l.ELF {
		return ParseLoadedELF(l)
	}
	return ParseLoaded(l)
}

// imageMatches are the slots of one image that a hook rebinds.
type imageMatches struct {
	l  Loaded
	ms []match // sorted by address
}

// apply rebinds one image for a hook. The caller holds r.mu.
func (r *Rebinder) apply(h *Hook, l Loaded) error {
	im, err := r.match(h, l)
	if err != nil || len(im.ms) == 0 {
		return err
	}
	if err := r.write(h, im, r.protections()); err != nil {
		return fmt.Errorf("image %s: %w", l.Name, err)
	}
	return nil
}

// match finds the slots of one image that a hook rebinds and publishes the originals they
// hold, without changing any slot. The caller holds r.mu.
func (r *Rebinder) match(h *Hook, l Loaded) (imageMatches, error) {
	im := imageMatches{l: l}
	img, err := parseLoaded(l)
	if err != nil {
		return im, fmt.Errorf("image %s: %w", l.Name, err)
	}
	var ms []match
	walk := img.WalkSlots
	if e, ok := img.(*ELFImage); ok {
		if h.prefixes == nil {
			h.prefixes = h.names.prefixes()
		}
		walk = func(visit SlotVisitor) error { return e.walk(h.prefixes, visit) }
	}
	err = walk(func(s *Slot, name, _ []byte) bool {
		if len(name) == 0 {
			return true
		}
		i, ok := h.names.Lookup(name)
		if !ok || !libraryMatches(h.rs[i].Library, img, s) {
			return true
		}
		m := match{slot: *s, index: i, addr: l.Slide + uintptr(s.Addr)}
		m.slot.Symbol = string(name) // only matched slots pay for the string
		ms = append(ms, m)
		return true
	})
	if err != nil {
		return im, fmt.Errorf("image %s: %w", l.Name, err)
	}
	if len(ms) == 0 {
		return im, nil
	}
	codeLo, codeHi := img.ownCode()
	// First publish the originals, so that a thread that reaches a replacement through a slot
	// changed below already finds the function the replacement forwards to.
	for _, m := range ms {
		if h.orig[m.index].Load() != 0 {
			continue
		}
		cur := r.rt.Strip(loadSlot(m.addr))
		if cur == h.rs[m.index].Replacement {
			continue
		}
		if c := uint64(cur) - uint64(l.Slide); uint64(cur) >= uint64(l.Slide) && c >= codeLo && c < codeHi {
			// Still the image's own stub helper (or PLT): ask for the real target rather than
			// save a pointer that, called, would make the dynamic linker bind this slot over the
			// hook.
			real, err := r.rt.Resolve(m.slot.Symbol, img.LibraryName(m.slot.Ordinal))
			if err != nil {
				return im, fmt.Errorf("image %s: resolving unbound lazy %s: %w", l.Name, h.rs[m.index].Name, err)
			}
			cur = real
		}
		h.orig[m.index].Store(cur)
		if p := h.rs[m.index].Publish; p != nil {
			p(cur)
		}
	}
	sort.Slice(ms, func(a, b int) bool { return ms[a].addr < ms[b].addr })
	im.ms = ms
	return im, nil
}

// write changes an image's matched slots to the hook's replacements, with prot telling the
// protection of each page. The caller holds r.mu.
func (r *Rebinder) write(h *Hook, im imageMatches, prot func(page uintptr) (Prot, error)) error {
	key := imageKey(im.l)
	return r.writeSlots(im.ms, prot, func(m match) (uintptr, error) {
		v := h.rs[m.index].Replacement
		if m.slot.Kind == KindAuth {
			return r.rt.Sign(v, m.addr, GOTAuth)
		}
		return v, nil
	}, func(m match, old, new uintptr) {
		h.writes = append(h.writes, slotWrite{addr: m.addr, old: old, new: new, image: key})
	})
}

// writeSlots stores a value into each slot, page by page: a read-only page is made writable
// for the stores and then given back exactly the protection it had.
func (r *Rebinder) writeSlots(ms []match, protOf func(page uintptr) (Prot, error), value func(match) (uintptr, error), done func(m match, old, new uintptr)) error {
	ps := r.rt.PageSize()
	for i := 0; i < len(ms); {
		page := ms[i].addr &^ (ps - 1)
		j := i
		for j < len(ms) && ms[j].addr&^(ps-1) == page {
			j++
		}
		prot, err := protOf(page)
		if err != nil {
			return fmt.Errorf("protection of page %#x: %w", page, err)
		}
		if prot&ProtWrite == 0 {
			if err := r.rt.Protect(page, ps, prot|ProtWrite); err != nil {
				return fmt.Errorf("making page %#x writable: %w", page, err)
			}
		}
		var werr error
		for _, m := range ms[i:j] {
			v, err := value(m)
			if err != nil {
				werr = err
				break
			}
			old := loadSlot(m.addr)
			storeSlot(m.addr, v)
			done(m, old, v)
		}
		if prot&ProtWrite == 0 {
			if err := r.rt.Protect(page, ps, prot); err != nil && werr == nil {
				werr = fmt.Errorf("restoring protection of page %#x: %w", page, err)
			}
		}
		if werr != nil {
			return werr
		}
		i = j
	}
	return nil
}

// Undo puts every slot the hook changed back as it was, and stops following new images. A
// slot that something else has changed since is left alone and reported.
func (h *Hook) Undo() error {
	r := h.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.undone {
		return nil
	}
	h.undone = true
	for i, x := range r.hooks {
		if x == h {
			r.hooks = append(r.hooks[:i], r.hooks[i+1:]...)
			break
		}
	}
	var ms []match
	var errs []error
	back := map[uintptr]uintptr{}
	for _, w := range h.writes {
		if cur := loadSlot(w.addr); cur != w.new {
			errs = append(errs, fmt.Errorf("slot %#x in %s changed since the hook (%#x, not %#x): left alone", w.addr, w.image, cur, w.new))
			continue
		}
		back[w.addr] = w.old
		ms = append(ms, match{addr: w.addr})
	}
	sort.Slice(ms, func(a, b int) bool { return ms[a].addr < ms[b].addr })
	err := r.writeSlots(ms, r.protections(), func(m match) (uintptr, error) { return back[m.addr], nil }, func(match, uintptr, uintptr) {})
	h.writes = nil
	return errors.Join(append(errs, err)...)
}

func (img *Image) segmentNamed(name string) *Segment {
	for _, s := range img.Segments {
		if s.Name == name {
			return s
		}
	}
	return nil
}
