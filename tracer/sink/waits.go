package sink

import (
	"sort"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// waitFlows pairs the releases (release marks) with the waits they ended, for the timelines'
// flows: from the holder's release to the waiter's wake-up. A wait's release is the latest
// release of the same address (its low 32 bits) in the same process, by another thread (the
// holder the wait names, when it names one), at or after the wait's start and before its end.
// Both ends must lie inside a call (a flow binds to the slice around it): a release made with
// no call open on its thread, and a wait outside any call, draw no flow.
type waitFlows struct {
	rels  map[uint64][]flowPoint // by pid<<32 | address
	waits []flowWait
}

type flowPoint struct{ pid, tid, ns uint64 }

// waitFlowIDs is where the waits' flow ids start: apart from the hops' (hops.go), which count
// from 1 in each process, and exact in a JSON number (below 2^53).
const waitFlowIDs = 1 << 40

type flowWait struct {
	at           flowPoint // the wake-up: the wait's end
	start        uint64
	addr, holder uint64
	name         string
}

// waitFlow is one flow: from a release to the wake-up of the wait it ended.
type waitFlow struct {
	id       uint64 // waitFlowIDs + 1, 2, ...
	from, to flowPoint
	name     string // the wait's: "wait pthread_mutex_lock"
	addr     uint64 // the low 32 bits of the primitive's address
	holder   uint64 // the releasing thread
}

func (f *waitFlows) release(pid, tid uint64, m *stream.Mark, depth int) {
	if depth == 0 {
		return
	}
	if f.rels == nil {
		f.rels = map[uint64][]flowPoint{}
	}
	k := pid<<32 | m.Count&0xffffffff
	f.rels[k] = append(f.rels[k], flowPoint{pid, tid, m.StartNanos})
}

func (f *waitFlows) wait(pid, tid uint64, c *engine.Call) {
	_, addr, holder, ok := stream.WaitOf(c.ID)
	if !ok || c.Flags&stream.FlagOpen != 0 || c.Depth == 0 {
		return
	}
	f.waits = append(f.waits, flowWait{flowPoint{pid, tid, c.StartNanos + c.DurNanos}, c.StartNanos, addr, holder, c.Name})
}

// flows are the waits whose release was seen, in the order of their releases.
func (f *waitFlows) flows() []waitFlow {
	var out []waitFlow
	for _, w := range f.waits {
		var best *flowPoint
		for i, r := range f.rels[w.at.pid<<32|w.addr] {
			if r.tid == w.at.tid || r.ns < w.start || r.ns > w.at.ns || (w.holder != 0 && r.tid != w.holder) {
				continue
			}
			if best == nil || r.ns > best.ns {
				best = &f.rels[w.at.pid<<32|w.addr][i]
			}
		}
		if best != nil {
			out = append(out, waitFlow{from: *best, to: w.at, name: w.name, addr: w.addr, holder: best.tid})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].from.ns < out[j].from.ns })
	for i := range out {
		out[i].id = waitFlowIDs + uint64(i+1)
	}
	return out
}
