package machobind

// The Rebinder's API: Rebinding, the Runtime it works through, Rebinder and Hook; rebinding
// a set of names (Rebind, RebindSets), images loaded later (RebindImage) and undoing (Undo).
// Plans, matching and writing are in rebind_plan.go, rebind_match.go and rebind_write.go.

import (
	"errors"
	"fmt"
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
	// parked: the rebindings (by index) whose slots hold their originals until Unpark
	parked map[int]bool
	// prefixes of the names, for walks of ELF objects (made at the first, under r.mu)
	prefixes *namePrefixes
}

type slotWrite struct {
	addr     uintptr
	old, new uintptr // before the hook; the replacement (signed for the slot)
	image    string
	index    int     // the rebinding, in the hook's
	kind     Kind    // the slot's
	parked   uintptr // while parked: what the slot holds instead of new (the original)
}

// holds is what the hook left in the slot: the replacement, or the original while parked.
func (w *slotWrite) holds() uintptr {
	if w.parked != 0 {
		return w.parked
	}
	return w.new
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
		if cur := loadSlot(w.addr); cur != w.holds() {
			errs = append(errs, fmt.Errorf("slot %#x in %s changed since the hook (%#x, not %#x): left alone", w.addr, w.image, cur, w.holds()))
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
