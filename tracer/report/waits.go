package report

import (
	"fmt"
	"sort"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// ReportWait is one contended wait inside a call (the recorder's waits: a lock, a condition, a
// semaphore, @synchronized, dispatch_sync), and who it waited for.
type ReportWait struct {
	Primitive  string `json:"primitive"` // the function that blocked: "objc_sync_enter", "pthread_mutex_lock", ...
	Address    string `json:"address"`   // the primitive's address, its low 32 bits ("0x1d8c2510"); @synchronized: the object's
	StartNanos uint64 `json:"start_ns"`
	DurNanos   uint64 `json:"dur_ns"`
	// The holder: the thread that owned the lock as the C library keeps it (a mutex's owner,
	// a rwlock's writer, an os_unfair_lock's owner), else the thread whose release (unlock,
	// signal, post) last came before the wait ended. HolderFrom says which: "owner",
	// "release", or "" (unknown: HolderTID 0).
	HolderTID    uint64 `json:"holder_tid,omitempty"`
	HolderThread string `json:"holder_thread,omitempty"`
	// HolderMethod is the innermost call open on the holder's thread at its release (without
	// one, at the wait's start) that lasted 1 ms or more; "" when none is known.
	HolderMethod string `json:"holder_method,omitempty"`
	HolderFrom   string `json:"holder_from,omitempty"`
	// HolderEnqueuedBy is who enqueued the work the holder's thread was running at the release
	// (without one, at the wait's start): an async hop's enqueuing call (hops.go); nil when it
	// ran in no recorded hop.
	HolderEnqueuedBy *HopRef `json:"holder_enqueued_by,omitempty"`
	ReleaseNanos     uint64  `json:"release_ns,omitempty"` // when the holder released it (0: no release seen)
}

// waitHolderSpan is how long a call must last for the report to keep it as a holder's method.
const waitHolderSpan = 1_000_000

// maxCallWaits bounds the waits a call of a list carries (the longest kept).
const maxCallWaits = 8

// waitState is what the report keeps for waits: per depth of the current thread, the waits
// inside the call open there; every thread's releases and calls of 1 ms or more (for the
// holders, resolved at Close).
type waitState struct {
	open     [][]ReportWait
	releases map[string][]waitRelease
	spans    map[uint64][]waitSpan // by pid<<32 ^ tid
	names    map[uint64]string
	hops     map[uint64]*stream.Hops // by pid: who enqueued a holder's work (hops.go)
}

type waitRelease struct {
	key   uint64 // thread
	tid   uint64
	nanos uint64
}

type waitSpan struct {
	start, end uint64
	depth      int
	method     string
}

func threadKey(pid, tid uint64) uint64 { return pid<<32 ^ tid }

// waitEnter makes room for the waits of a call entered at depth.
func (r *reportTree) waitEnter(depth int) {
	w := &r.w
	for len(w.open) <= depth {
		w.open = append(w.open, nil)
	}
	w.open[depth] = w.open[depth][:0]
}

// waitExit notes what a call that ended at depth means for waits: a wait goes to its caller's
// list; a call of 1 ms or more is kept as a possible holder's method; the call's waits go up
// to its caller. It returns the call's waits (longest first, at most maxCallWaits).
func (r *reportTree) waitExit(c *engine.Call, depth int) []ReportWait {
	w := &r.w
	th := r.th
	if w.spans == nil {
		w.spans, w.releases, w.names = map[uint64][]waitSpan{}, map[string][]waitRelease{}, map[uint64]string{}
	}
	w.names[threadKey(th.PID, th.TID)] = th.Name
	var mine []ReportWait
	if depth < len(w.open) {
		mine = w.open[depth]
	}
	if c.Flags&stream.FlagWait != 0 {
		prim, addr, holder, _ := stream.WaitOf(c.ID)
		rw := ReportWait{Primitive: prim.String(), Address: fmt.Sprintf("%#x", addr), StartNanos: c.StartNanos, DurNanos: c.DurNanos, HolderTID: holder}
		if holder != 0 {
			rw.HolderFrom = "owner"
		}
		mine = []ReportWait{rw}
	} else if c.DurNanos >= waitHolderSpan {
		k := threadKey(th.PID, th.TID)
		w.spans[k] = append(w.spans[k], waitSpan{c.StartNanos, c.StartNanos + c.DurNanos, depth, c.Name})
	}
	if depth > 0 && len(mine) > 0 {
		for len(w.open) < depth {
			w.open = append(w.open, nil)
		}
		p := &w.open[depth-1]
		*p = append(*p, mine...)
		if len(*p) > 4*maxCallWaits {
			sortWaits(*p)
			*p = (*p)[:maxCallWaits]
		}
	}
	if len(mine) == 0 {
		return nil
	}
	out := append([]ReportWait(nil), mine...)
	sortWaits(out)
	return out[:min(len(out), maxCallWaits)]
}

func sortWaits(ws []ReportWait) {
	sort.SliceStable(ws, func(i, j int) bool { return ws[i].DurNanos > ws[j].DurNanos })
}

// waitRelease notes a release mark (its count is the primitive's address).
func (r *reportTree) waitReleased(m *stream.Mark) {
	w := &r.w
	if w.releases == nil {
		w.spans, w.releases, w.names = map[uint64][]waitSpan{}, map[string][]waitRelease{}, map[uint64]string{}
	}
	a := fmt.Sprintf("%#x", m.Count&0xffffffff)
	w.releases[a] = append(w.releases[a], waitRelease{threadKey(r.th.PID, r.th.TID), r.th.TID, m.StartNanos})
}

// waitsResolve names the holders of the waits of the calls listed: the holder's thread, the
// release that ended the wait, the holder's method then.
func (r *reportTree) waitsResolve(pid uint64, waiter uint64, ws []ReportWait) {
	w := &r.w
	for i := range ws {
		x := &ws[i]
		end := x.StartNanos + x.DurNanos
		// the latest release of the same address by another thread before the wait ended
		var rel *waitRelease
		for k, rr := range w.releases[x.Address] {
			if rr.tid == waiter || rr.nanos > end || (x.HolderTID != 0 && rr.tid != x.HolderTID) {
				continue
			}
			if rel == nil || rr.nanos > rel.nanos {
				rel = &w.releases[x.Address][k]
			}
		}
		at := x.StartNanos
		if rel != nil {
			x.ReleaseNanos = rel.nanos
			at = rel.nanos
			if x.HolderTID == 0 {
				x.HolderTID, x.HolderFrom = rel.tid, "release"
			}
		}
		if x.HolderTID == 0 {
			continue
		}
		k := threadKey(pid, x.HolderTID)
		x.HolderThread = w.names[k]
		x.HolderEnqueuedBy = hopRef(w.hops[pid], x.HolderTID, at)
		best := -1
		for j, s := range w.spans[k] {
			if s.start <= at && at <= s.end && (best < 0 || s.depth > w.spans[k][best].depth) {
				best = j
			}
		}
		if best >= 0 {
			x.HolderMethod = w.spans[k][best].method
		}
	}
}

// waitsClose resolves the holders of every listed call's waits.
func (r *reportTree) waitsClose(rep *Report) {
	for _, l := range [][]ReportCall{rep.Hitches, rep.OffMain, rep.Longest, rep.Open} {
		for i := range l {
			r.waitsResolve(l[i].PID, l[i].TID, l[i].Waits)
			l[i].Why = why(&l[i])
		}
	}
}

// waitFor says what a wait on the primitive waited for, of the holder.
func waitFor(prim string) string {
	switch prim {
	case "pthread_cond_wait", "pthread_cond_timedwait":
		return "for a signal from"
	case "sem_wait", "sem_timedwait", "dispatch_semaphore_wait":
		return "for a post from"
	case "dispatch_sync":
		return "for the queue held by"
	case "dispatch_group_wait":
		return "for the group of"
	}
	return "for the lock held by"
}

// why is the call's sentence: where its time went, running or waiting, and for whom
// ("-[App frame:] 45.000 ms on thread main: 3.000 ms running, 42.000 ms waiting in
// objc_sync_enter for the lock held by thread indexer in -[Index compact] (enqueued by -[App
// scheduleIndex])"); "" without waits.
// Running is the CPU samples' running time where the thread has them (report_cpu.go), else
// the call's time outside the waits ("outside waits").
func why(c *ReportCall) string {
	if len(c.Waits) == 0 {
		return ""
	}
	msf := func(ns uint64) string { return fmt.Sprintf("%.3f ms", float64(ns)/1e6) }
	head := msf(c.DurNanos-min(c.DurNanos, c.WaitingNanos)) + " outside waits"
	if c.CPU != nil {
		head = msf(c.CPU.RunningNanos) + " running"
	}
	s := fmt.Sprintf("%s %s on thread %s: %s", engine.DisplayName(c.Method), msf(c.DurNanos), c.Thread, head)
	for i, w := range c.Waits {
		if i == 2 {
			var rest uint64
			for _, x := range c.Waits[i:] {
				rest += x.DurNanos
			}
			s += fmt.Sprintf(", %s in %d more waits", msf(rest), len(c.Waits)-i)
			break
		}
		s += fmt.Sprintf(", %s waiting in %s", msf(w.DurNanos), w.Primitive)
		switch {
		case w.HolderTID == 0:
			s += " (holder unknown)"
		default:
			th := w.HolderThread
			if th == "" {
				th = fmt.Sprintf("tid %d", w.HolderTID)
			}
			s += fmt.Sprintf(" %s thread %s", waitFor(w.Primitive), th)
			if w.HolderMethod != "" {
				s += " in " + engine.DisplayName(w.HolderMethod)
			}
			if e := w.HolderEnqueuedBy; e != nil && e.Method != "" {
				s += " (enqueued by " + engine.DisplayName(e.Method) + ")"
			}
		}
	}
	return s
}
