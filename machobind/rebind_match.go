package machobind

// Matching: which loaded images a Rebinder watches and which of their slots a
// Rebinding selects (by name and library).

import (
	"fmt"
	"path"
	"runtime/debug"
	"sort"
)

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

// parseLoaded reads a loaded image. The image can be unloaded (dlclose on another thread)
// between the listing of the images and this read, unmapping what is read: such a fault is
// turned into an error (the image is skipped) rather than killing the traced program.
func parseLoaded(l Loaded) (img loadedImage, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer catchFault(&err, func(addr uintptr) error {
		img = nil
		return fmt.Errorf("unreadable at %#x (unloaded while it was read?)", addr)
	})
	if l.ELF {
		return ParseLoadedELF(l)
	}
	return ParseLoaded(l)
}

// catchFault, deferred after debug.SetPanicOnFault(true), turns a memory fault into *err, made
// by what from the faulting address; any other panic goes on.
func catchFault(err *error, what func(addr uintptr) error) {
	if r := recover(); r != nil {
		f, ok := r.(interface{ Addr() uintptr })
		if !ok {
			panic(r)
		}
		*err = what(f.Addr())
	}
}

// imageMatches are the slots of one image that a hook rebinds.
type imageMatches struct {
	l  Loaded
	ms []match // sorted by address
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

func (img *Image) segmentNamed(name string) *Segment {
	for _, s := range img.Segments {
		if s.Name == name {
			return s
		}
	}
	return nil
}
