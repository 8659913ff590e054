package machobind

// Parking: a hook's slots given their originals back for a while (a tracer paused: a call then
// costs nothing over the untraced one) and its replacements again, images loaded meanwhile
// included.

import (
	"errors"
	"fmt"
	"sort"
)

// Park puts into every slot of the named rebindings (every rebinding of the hook when none is
// named) that still holds the hook's replacement the original the replacement forwards to
// (Original: the resolved function, never a stub helper, signed for the slot where the platform
// signs pointers), until Unpark. Images loaded while parked get the originals too, and the
// replacements at Unpark. A slot something else has changed since the hook is left alone and
// reported. A name the hook does not rebind is ignored. It returns the number of slots changed.
func (h *Hook) Park(names ...string) (int, error) {
	r := h.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.undone {
		return 0, errors.New("park: the hook was undone")
	}
	idx := map[int]bool{}
	if len(names) == 0 {
		for i := range h.rs {
			idx[i] = true
		}
	}
	for _, n := range names {
		for _, k := range SymbolKeys(n) {
			if i, ok := h.names[k]; ok {
				idx[i] = true
			}
		}
	}
	if h.parked == nil {
		h.parked = map[int]bool{}
	}
	var us []slotUpdate
	var errs []error
	for i := range idx {
		h.parked[i] = true
	}
	for k := range h.writes {
		w := &h.writes[k]
		if !idx[w.index] || w.parked != 0 {
			continue
		}
		if cur := loadSlot(w.addr); cur != w.new {
			errs = append(errs, fmt.Errorf("slot %#x in %s changed since the hook (%#x, not %#x): left alone", w.addr, w.image, cur, w.new))
			continue
		}
		v, err := r.forSlot(h.orig[w.index].Load(), w.addr, w.kind)
		if err != nil || v == 0 {
			errs = append(errs, fmt.Errorf("slot %#x in %s: no original to park: %v", w.addr, w.image, err))
			continue
		}
		us = append(us, slotUpdate{w, v})
	}
	n, err := h.rewrite(us, func(w *slotWrite, v uintptr) { w.parked = v })
	return n, errors.Join(append(errs, err)...)
}

// Unpark puts the replacements back into the slots Park (or a load while parked) gave their
// originals, where they still hold them; a slot changed since is left alone and reported. It
// returns the number of slots changed.
func (h *Hook) Unpark() (int, error) {
	r := h.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.undone {
		return 0, errors.New("unpark: the hook was undone")
	}
	h.parked = nil
	var us []slotUpdate
	var errs []error
	for k := range h.writes {
		w := &h.writes[k]
		if w.parked == 0 {
			continue
		}
		if cur := loadSlot(w.addr); r.rt.Strip(cur) != r.rt.Strip(w.parked) {
			errs = append(errs, fmt.Errorf("slot %#x in %s changed while parked (%#x, not %#x): left alone", w.addr, w.image, cur, w.parked))
			w.parked = 0 // no longer the hook's: Undo reports it
			continue
		}
		us = append(us, slotUpdate{w, w.new})
	}
	n, err := h.rewrite(us, func(w *slotWrite, _ uintptr) { w.parked = 0 })
	return n, errors.Join(append(errs, err)...)
}

// Parked reports whether the hook is parked (Park called, Unpark not since): its named
// rebindings' slots, those of images loaded since included, hold their originals.
func (h *Hook) Parked() bool {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	return len(h.parked) > 0
}

// ParkedSlots returns the number of slots that hold their originals because of Park.
func (h *Hook) ParkedSlots() int {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	n := 0
	for _, w := range h.writes {
		if w.parked != 0 {
			n++
		}
	}
	return n
}

// slotUpdate is a slot's record and the value rewrite stores into the slot.
type slotUpdate struct {
	w *slotWrite
	v uintptr
}

// rewrite stores each update's value into its slot, page by page (in address order), and calls
// done on the slot's record for each slot written. The caller holds r.mu, so the records stay
// where they are; writeSlots' matches carry the update's position as their index.
func (h *Hook) rewrite(us []slotUpdate, done func(w *slotWrite, v uintptr)) (int, error) {
	if len(us) == 0 {
		return 0, nil
	}
	sort.Slice(us, func(a, b int) bool { return us[a].w.addr < us[b].w.addr })
	ms := make([]match, len(us))
	for i, u := range us {
		ms[i] = match{addr: u.w.addr, index: i}
	}
	n := 0
	err := h.r.writeSlots(ms, h.r.protections(), func(m match) (uintptr, error) { return us[m.index].v, nil },
		func(m match, _, v uintptr) {
			done(us[m.index].w, v)
			n++
		})
	return n, err
}
