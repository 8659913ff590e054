package machobind

// Writing: a page's protection as the Runtime reports it, and the slot writes that
// make a page writable, store the replacements and restore the protection.

import (
	"fmt"
	"runtime/debug"
	"sort"
)

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

// write changes an image's matched slots to the hook's replacements (to the originals for a
// parked rebinding, recording the replacement for Unpark), with prot telling the protection of
// each page. The caller holds r.mu.
func (r *Rebinder) write(h *Hook, im imageMatches, prot func(page uintptr) (Prot, error)) error {
	return r.writeMatches(im, prot, func(m match) (*Hook, int) { return h, m.index })
}

// writeMatches is write for matches of several hooks: which(m) is the hook of a match and the
// index of its rebinding there.
func (r *Rebinder) writeMatches(im imageMatches, prot func(page uintptr) (Prot, error), which func(match) (*Hook, int)) error {
	key := imageKey(im.l)
	news := map[uintptr]uintptr{}
	return r.writeSlots(im.ms, prot, func(m match) (uintptr, error) {
		h, i := which(m)
		v, err := r.forSlot(h.rs[i].Replacement, m.addr, m.slot.Kind)
		if err != nil || !h.parked[i] || h.orig[i].Load() == 0 {
			return v, err
		}
		news[m.addr] = v
		return r.forSlot(h.orig[i].Load(), m.addr, m.slot.Kind)
	}, func(m match, old, stored uintptr) {
		h, i := which(m)
		w := slotWrite{addr: m.addr, old: old, new: stored, image: key, index: i, kind: m.slot.Kind}
		if v, ok := news[m.addr]; ok {
			w.new, w.parked = v, stored
		}
		h.writes = append(h.writes, w)
	})
}

// forSlot is a function pointer as a slot of that kind at addr holds it: signed for the slot
// where the platform signs them (arm64e's __auth_got).
func (r *Rebinder) forSlot(p, addr uintptr, k Kind) (uintptr, error) {
	if k == KindAuth {
		return r.rt.Sign(p, addr, GOTAuth)
	}
	return p, nil
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
			old, err := swapSlot(m.addr, v)
			if err != nil {
				werr = err
				break
			}
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

// swapSlot stores v into a slot and returns what it held. The image can be unloaded (dlclose
// on another thread) between its reading and this write, its slot's page unmapped: such a fault
// is an error for that image (left as it is) rather than one that kills the traced program.
func swapSlot(addr, v uintptr) (old uintptr, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer catchFault(&err, func(addr uintptr) error {
		return fmt.Errorf("slot %#x unwritable (unloaded since it was read?)", addr)
	})
	old = loadSlot(addr)
	storeSlot(addr, v)
	return old, nil
}
