package stream

import (
	"sort"
	"strconv"
)

// Hop reports whether the mark is one of an async hop's (MarkHopEnqueue, MarkHopBegin,
// MarkHopEnd): the reader turns them into Header.Hops and hands no sink the marks themselves.
func (k MarkKind) Hop() bool { return k >= MarkHopEnqueue && k <= MarkHopEnd }

// Hop is work one thread handed to another, or to later (performSelector:onThread:, a timer,
// an operation, dispatch_async, ...), as its marks tell it: where it was enqueued and each
// time it ran (a repeating timer runs more than once; work that never ran has no run).
type Hop struct {
	ID        uint64 // the recorder's, unique in its process
	Enqueued  bool   // its enqueue mark was read
	EnqTID    uint64
	EnqThread string // ThreadLabel of the enqueuing thread
	EnqNanos  uint64 // when it was enqueued
	// EnqCall is the innermost call that encloses the enqueue (the flow's source; Depth -1 when
	// none was recorded); EnqueuedBy names the call that asked for it: EnqCall, or where that
	// is a framework's enqueuing method (-[NSOperationQueue addOperation:], ...), the first
	// call around it that is not one.
	EnqCall    CallRef
	EnqueuedBy string
	Runs       []HopRun
}

// HopRun is one execution of a hop's work item.
type HopRun struct {
	TID        uint64
	Thread     string // ThreadLabel of the executing thread
	BeginNanos uint64
	EndNanos   uint64 // the end of the trace when it never returned (Ended false)
	Ended      bool
	// Call is the first call that started inside the execution: what the work item ran
	// (Depth -1 when no call was recorded inside it).
	Call CallRef
}

// CallRef names a call of a thread by its start and depth (as Call.StartNanos and Call.Depth).
type CallRef struct {
	StartNanos uint64
	Depth      int
	Name       string
}

// Label is "enqueued by METHOD on thread THREAD" (or "enqueued on thread THREAD" when no
// call enclosed the enqueue; "" for a hop whose enqueue was not read).
func (h *Hop) Label() string {
	if !h.Enqueued {
		return ""
	}
	if h.EnqueuedBy == "" {
		return "enqueued on thread " + h.EnqThread
	}
	return "enqueued by " + h.EnqueuedBy + " on thread " + h.EnqThread
}

// FlowID is the id of the flow from the hop's enqueue to its run r in a trace of processes:
// unique per process, hop and run.
func FlowID(pid, hop uint64, run int) uint64 {
	return (pid&0xffffff)<<40 ^ hop<<8 ^ uint64(run&0xff) ^ 1<<63
}

// Hops is a process's hops, indexed by the calls they start from and land on.
type Hops struct {
	List  []Hop
	enq   map[hopKey][]int    // enqueuing call -> hops
	run   map[hopKey][][2]int // executed call -> (hop, run)
	spans map[uint64][][2]int // thread -> its runs, by begin
	pos   map[uint64]int      // hop id -> index
}

type hopKey struct {
	tid, start uint64
	depth      int
}

// NewHops indexes hops.
func NewHops(list []Hop) *Hops {
	h := &Hops{List: list, enq: map[hopKey][]int{}, run: map[hopKey][][2]int{}, spans: map[uint64][][2]int{}, pos: map[uint64]int{}}
	for i := range list {
		hp := &list[i]
		h.pos[hp.ID] = i
		if hp.Enqueued && hp.EnqCall.Depth >= 0 {
			k := hopKey{hp.EnqTID, hp.EnqCall.StartNanos, hp.EnqCall.Depth}
			h.enq[k] = append(h.enq[k], i)
		}
		for j := range hp.Runs {
			r := &hp.Runs[j]
			if r.Call.Depth >= 0 {
				k := hopKey{r.TID, r.Call.StartNanos, r.Call.Depth}
				h.run[k] = append(h.run[k], [2]int{i, j})
			}
			h.spans[r.TID] = append(h.spans[r.TID], [2]int{i, j})
		}
	}
	for tid, s := range h.spans {
		sort.SliceStable(s, func(a, b int) bool {
			return list[s[a][0]].Runs[s[a][1]].BeginNanos < list[s[b][0]].Runs[s[b][1]].BeginNanos
		})
		h.spans[tid] = s
	}
	return h
}

// Len is how many hops there are (0 for a nil index).
func (h *Hops) Len() int {
	if h == nil {
		return 0
	}
	return len(h.List)
}

// From lists the hops a call enqueued (the call that encloses each enqueue innermost).
func (h *Hops) From(tid, startNanos uint64, depth int) []*Hop {
	if h.Len() == 0 {
		return nil
	}
	var out []*Hop
	for _, i := range h.enq[hopKey{tid, startNanos, depth}] {
		out = append(out, &h.List[i])
	}
	return out
}

// Ran lists the hop runs that begin with a call (the first call inside each run), innermost
// first (the latest to begin: work an operation queue's thread ran is the operation's before
// the thread's), and their run indexes.
func (h *Hops) Ran(tid, startNanos uint64, depth int) ([]*Hop, []int) {
	if h.Len() == 0 {
		return nil, nil
	}
	ps := h.run[hopKey{tid, startNanos, depth}]
	if len(ps) == 0 {
		return nil, nil
	}
	ps = append([][2]int(nil), ps...)
	sort.SliceStable(ps, func(a, b int) bool {
		return h.List[ps[a][0]].Runs[ps[a][1]].BeginNanos > h.List[ps[b][0]].Runs[ps[b][1]].BeginNanos
	})
	hs := make([]*Hop, len(ps))
	rs := make([]int, len(ps))
	for i, p := range ps {
		hs[i], rs[i] = &h.List[p[0]], p[1]
	}
	return hs, rs
}

// Within is the hop whose run on the thread encloses the moment innermost (the latest to
// begin of those that do), and that run; nil when none does.
func (h *Hops) Within(tid, at uint64) (*Hop, *HopRun) {
	if h.Len() == 0 {
		return nil, nil
	}
	s := h.spans[tid]
	n := sort.Search(len(s), func(i int) bool { return h.List[s[i][0]].Runs[s[i][1]].BeginNanos > at })
	for i := n - 1; i >= 0; i-- {
		hp := &h.List[s[i][0]]
		if r := &hp.Runs[s[i][1]]; r.BeginNanos <= at && at <= r.EndNanos {
			return hp, r
		}
	}
	return nil, nil
}

// ByID is the hop of that id, or nil.
func (h *Hops) ByID(id uint64) *Hop {
	if h.Len() == 0 {
		return nil
	}
	if i, ok := h.pos[id]; ok {
		return &h.List[i]
	}
	return nil
}

// String is a hop as one line, for messages: "hop 3 (enqueued by ... ; ran 1 time)".
func (h *Hop) String() string {
	return "hop " + strconv.FormatUint(h.ID, 10) + " (" + h.Label() + "; ran " + strconv.Itoa(len(h.Runs)) + " times)"
}
