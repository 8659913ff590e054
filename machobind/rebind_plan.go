package machobind

// Plans: RebindSets in two steps, matching every set first (PlanSets) and writing
// the slots afterwards (Commit).

import (
	"errors"
	"fmt"
)

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
		err := r.writeMatches(im, prot, func(m match) (*Hook, int) { return p.hooks[p.setOf[m.index]], p.inSet[m.index] })
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
