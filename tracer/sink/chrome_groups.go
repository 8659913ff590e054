// The Chrome JSON sink's groups (chrome.go): the events at one time held as a group, an end given
// its self and total time when a begin of the same name follows it in the group (what keeps
// speedscope from nesting a touching sibling), the times inserted in one pass over the group.

package sink

// chromeEnd is an end written in the current group, without its self and total time: at
// (an offset in the output's current block) is where they go when a begin of name at that time
// follows (see ChromeSink.endGroup); how says in which form.
type chromeEnd struct {
	at        int
	how       uint8 // endArgsNew, endArgsFirst, endArgsAfter
	name      string
	self, dur uint64
}

const (
	endArgsNew   = iota // the end has no args: they are added whole
	endArgsFirst        // its args are {"unwound":true}: the times go first in them
	endArgsAfter        // its args start with folded_calls: the times follow it
)

// at starts an event at time ts. Events are written at once, in pre-order; those at one
// time are a group: an end gets args (self_ns, dur_ns) when a begin of the same name is in its
// group, which is what keeps speedscope from nesting the touching sibling in it (see
// ChromeSink). Other ends carry nothing (but unwound: true), so that speedscope has nothing to
// warn about. So an end is written without them, where they go is remembered, and the
// output's current block is kept (not handed to its writer) until the group ends: the next
// event at a later time, or the thread's end (endGroup).
func (s *ChromeSink) at(ts uint64) error {
	if s.grouped && ts == s.groupTs {
		return nil
	}
	return s.newGroup(ts)
}

func (s *ChromeSink) newGroup(ts uint64) error {
	if len(s.gEnds) > 0 { // endGroup, in line
		if len(s.gBegins) > 0 {
			s.addEndTimes()
		}
		s.gEnds = s.gEnds[:0]
		s.w.commit(s.w.b)
	}
	s.gBegins = s.gBegins[:0]
	if q := &s.inst; q.next < len(q.list) && q.list[q.next].Nanos < ts || s.cpu.next < len(s.cpu.ss) && s.cpu.ss[s.cpu.next].Nanos < ts {
		if err := s.writeTimedBefore(ts, false); err != nil {
			return err
		}
	}
	s.grouped, s.groupTs = true, ts
	return s.w.err
}

// endGroup ends the group: the times go into its ends that a begin of the same name follows
// (inserted in one pass over the group's bytes), and the current block is handed on.
func (s *ChromeSink) endGroup() error {
	s.grouped = false
	if len(s.gEnds) == 0 {
		s.gBegins = s.gBegins[:0]
		return nil
	}
	if len(s.gBegins) > 0 {
		s.addEndTimes()
	}
	s.gEnds, s.gBegins = s.gEnds[:0], s.gBegins[:0]
	s.w.commit(s.w.b)
	return s.w.err
}

// addEndTimes inserts self_ns and dur_ns into the group's ends whose name a begin of the group
// has.
func (s *ChromeSink) addEndTimes() {
	// the begins of the group, by name: a scan for the small groups of every day, a map for
	// large ones
	var begins map[string]bool
	if len(s.gBegins) > 16 {
		begins = make(map[string]bool, len(s.gBegins))
		for _, n := range s.gBegins {
			begins[n] = true
		}
	}
	begun := func(name string) bool {
		if begins != nil {
			return begins[name]
		}
		for _, n := range s.gBegins {
			if n == name {
				return true
			}
		}
		return false
	}
	// the insertions, in order, into one scratch buffer: ins[k] ends at insEnd[k]
	ins := s.buf[:0]
	at, ends := s.insAt[:0], s.insEnd[:0]
	for i := range s.gEnds {
		e := &s.gEnds[i]
		if !begun(e.name) {
			continue
		}
		switch e.how {
		case endArgsNew:
			ins = append(ins, `,"args":{"self_ns":`...)
		case endArgsFirst:
			ins = append(ins, `"self_ns":`...)
		default:
			ins = append(ins, `,"self_ns":`...)
		}
		ins = appendDec(ins, e.self)
		ins = append(ins, `,"dur_ns":`...)
		ins = appendDec(ins, e.dur)
		switch e.how {
		case endArgsNew:
			ins = append(ins, '}')
		case endArgsFirst:
			ins = append(ins, ',')
		}
		at, ends = append(at, e.at), append(ends, len(ins))
	}
	s.buf, s.insAt, s.insEnd = ins, at, ends
	if len(at) == 0 {
		return
	}
	// grow the block, then move each stretch after an insertion to its place, last first
	b := s.w.b
	n := len(b)
	b = append(b, ins...) // (the bytes are placeholders)
	to := len(b)
	for k := len(at) - 1; k >= 0; k-- {
		from := 0
		if k > 0 {
			from = ends[k-1]
		}
		seg := b[at[k]:n]
		to -= len(seg)
		copy(b[to:], seg)
		to -= ends[k] - from
		copy(b[to:], ins[from:ends[k]])
		n = at[k]
	}
	s.w.b = b
}
