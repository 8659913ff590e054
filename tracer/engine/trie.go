// The aggregates' model: a trie of call stacks per thread (calls and self time per distinct
// stack), filled by PreOrder replay or directly by the aggregates' path (aggregate.go), and
// read by the aggregate sinks (pprof, folded stacks, flame graphs).

package engine

import (
	"strconv"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// StackTrie adds up calls per (thread, call stack) as PreOrder replays them: a node per
// distinct stack, its calls and its self time. A thread's root node is the thread itself.
// Memory grows with the number of distinct stacks, not with the number of calls.
//
// A call that was still running at the end of the trace puts its self time on a child frame
// "[running]", a call an exception unwound on "[unwound]"; a mark is a child frame of the calls
// open around it ("[lost N]": N calls, the time they were lost in; "[wait]": the time the thread
// waited for buffer space), its time taken from the self time of the call it happened in.
type StackTrie struct {
	Names    []string
	nameID   map[string]int32
	byMethod []int32 // a call's Method -> its name id + 1 (0: not yet)
	Nodes    []trieNode
	kids     kidIndex          // parent node << 32 | name -> node
	markIDs  map[markKey]int32 // marks' labels' name ids

	Threads []trieThread
	labels  map[string]bool
	path    []int32  // the current thread's root, then the open calls
	marked  []uint64 // per entry of path: time of the marks inside it, taken from its self time
	Start   uint64   // earliest call start and latest end, over every thread
	End     uint64
	any     bool
}

type trieNode struct {
	Parent, Name int32
	memo         int32 // the child looked up last
	Count, Self  uint64
}

type trieThread struct {
	Label string
	TID   uint64
	PID   uint64
	Root  int32
	total uint64 // time in the thread's outermost calls and marks, ns
}

func NewStackTrie() *StackTrie {
	return &StackTrie{nameID: map[string]int32{}, labels: map[string]bool{}}
}

// name returns a name's id, numbering it when new.
func (a *StackTrie) name(s string) int32 {
	id, ok := a.nameID[s]
	if !ok {
		id = int32(len(a.Names))
		a.Names = append(a.Names, s)
		a.nameID[s] = id
	}
	return id
}

// callName is name for a call's method, by its Method.
func (a *StackTrie) callName(c *Call) int32 {
	if m := c.Method; m != 0 && int(m) < len(a.byMethod) {
		if v := a.byMethod[m]; v != 0 {
			return v - 1
		}
	}
	id := a.name(c.Name)
	if c.Method != 0 {
		a.byMethod = Grow(a.byMethod, c.Method)
		a.byMethod[c.Method] = id + 1
	}
	return id
}

type kidEntry struct {
	key  uint64 // parent << 32 | name
	node int32  // 0: empty (node 0 is a thread's root, never a child)
}

// kidIndex finds a trie's node by its parent and name (the key: parent << 32 | name), for the
// stack trie and the aggregates' per-thread tries: open addressing from a Fibonacci hash,
// doubled when half full.
type kidIndex struct {
	slots []kidEntry
	n     int
}

// slot is key's slot: the one holding it, or the empty one where it goes (filled by add).
func (x *kidIndex) slot(key uint64) *kidEntry {
	if len(x.slots) == 0 {
		x.slots = make([]kidEntry, 1<<12)
	}
	mask := uint64(len(x.slots) - 1)
	for h := (key * 0x9e3779b97f4a7c15) >> 32; ; h++ {
		if s := &x.slots[h&mask]; s.node == 0 || s.key == key {
			return s
		}
	}
}

// add puts node for key into s, the empty slot slot gave for it.
func (x *kidIndex) add(s *kidEntry, key uint64, node int32) {
	s.key, s.node = key, node
	if x.n++; 2*x.n > len(x.slots) {
		old := x.slots
		x.slots = make([]kidEntry, 2*len(old))
		for _, e := range old {
			if e.node != 0 {
				*x.slot(e.key) = e
			}
		}
	}
}

// reset empties the index, keeping its memory.
func (x *kidIndex) reset() {
	clear(x.slots)
	x.n = 0
}

// markKey is what a mark's label says.
type markKey struct {
	kind  stream.MarkKind
	count uint64
}

// markName is the name id of a mark's label.
func (a *StackTrie) markName(m *stream.Mark) int32 {
	k := markKey{m.Kind, m.Count}
	if m.Kind == stream.MarkWait {
		k.count = 0
	}
	id, ok := a.markIDs[k]
	if !ok {
		id = a.name(MarkLabel(m))
		if a.markIDs == nil {
			a.markIDs = map[markKey]int32{}
		}
		a.markIDs[k] = id
	}
	return id
}

func (a *StackTrie) kid(parent int32, name string) int32 {
	return a.kidID(parent, a.name(name))
}

// kidID is kid for a name id.
func (a *StackTrie) kidID(parent, nm int32) int32 {
	if m := a.Nodes[parent].memo; m > 0 && a.Nodes[m].Name == nm {
		return m // the same callee as last time
	}
	return a.kidSlow(parent, nm)
}

// kidSlow is kidID when the callee is not the one looked up last.
func (a *StackTrie) kidSlow(parent, nm int32) int32 {
	k := uint64(uint32(parent))<<32 | uint64(uint32(nm))
	s := a.kids.slot(k)
	n := s.node
	if n == 0 {
		n = int32(len(a.Nodes))
		a.Nodes = append(a.Nodes, trieNode{Parent: parent, Name: nm})
		a.kids.add(s, k, n)
	}
	a.Nodes[parent].memo = n
	return n
}

func (a *StackTrie) BeginThread(h *stream.Header, t *stream.Thread) error {
	label := ThreadLabel(t)
	if a.labels[label] {
		label += " (tid " + strconv.FormatUint(t.TID, 10) + ")"
	}
	a.labels[label] = true
	root := int32(len(a.Nodes))
	a.Nodes = append(a.Nodes, trieNode{Parent: -1, Name: a.name(label)})
	a.Threads = append(a.Threads, trieThread{Label: label, TID: t.TID, PID: h.PID, Root: root})
	a.path = append(a.path[:0], root)
	a.marked = append(a.marked[:0], 0)
	return nil
}

func (a *StackTrie) span(start, dur uint64) {
	if !a.any || start < a.Start {
		a.Start = start
	}
	a.End = max(a.End, start+dur)
	a.any = true
}

// Enter counts the call on its stack's node; its self time is added when it exits (where it
// is known).
func (a *StackTrie) Enter(c *Call, depth int) error {
	a.path = a.path[:depth+1]
	a.marked = a.marked[:depth+1]
	n := a.kidID(a.path[depth], a.callName(c))
	a.Nodes[n].Count++
	if depth == 0 {
		a.Threads[len(a.Threads)-1].total += c.DurNanos
		a.span(c.StartNanos, c.DurNanos)
	}
	a.path = append(a.path, n)
	a.marked = append(a.marked, 0)
	return nil
}

func (a *StackTrie) Exit(c *Call, depth int) error {
	if depth+1 >= len(a.path) {
		return nil
	}
	n := a.path[depth+1]
	self := c.SelfNanos - min(c.SelfNanos, a.marked[depth+1])
	switch {
	case c.Flags&stream.FlagOpen != 0:
		a.Nodes[a.kid(n, FrameRunning)].Self += self
	case c.Flags&stream.FlagUnwound != 0:
		a.Nodes[a.kid(n, FrameUnwound)].Self += self
	default:
		a.Nodes[n].Self += self
	}
	return nil
}

func (a *StackTrie) Mark(m *stream.Mark, depth int) error {
	if m.Kind == stream.MarkRelease { // a lock's release: no frame of its own
		return nil
	}
	parent := a.path[depth]
	n := a.kidID(parent, a.markName(m))
	a.Nodes[n].Count += m.Count
	dur := m.DurNanos
	if depth > 0 {
		a.marked[depth] += dur
	} else {
		a.Threads[len(a.Threads)-1].total += dur
		a.span(m.StartNanos, dur)
	}
	a.Nodes[n].Self += dur
	return nil
}

func (a *StackTrie) EndThread() error { return nil }

func (a *StackTrie) Close(Totals) error { return nil }

func (a *StackTrie) IsRoot(n int32) bool { return a.Nodes[n].Parent < 0 }

// Stack returns a node's frames, root first.
func (a *StackTrie) Stack(n int32, out []string) []string {
	out = out[:0]
	for ; n >= 0; n = a.Nodes[n].Parent {
		out = append(out, DisplayName(a.Names[a.Nodes[n].Name]))
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
