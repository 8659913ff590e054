package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// treeLog records what a TreeSink is told.
type treeLog struct{ out []string }

func (l *treeLog) BeginThread(*stream.Header, *stream.Thread) error {
	l.out = append(l.out, "thread")
	return nil
}
func (l *treeLog) Enter(c *Call, d int) error {
	l.out = append(l.out, fmt.Sprintf("+%s@%d/%d", c.Name, c.StartNanos, d))
	return nil
}
func (l *treeLog) Exit(c *Call, d int) error { l.out = append(l.out, "-"+c.Name); return nil }
func (l *treeLog) Mark(m *stream.Mark, d int) error {
	l.out = append(l.out, fmt.Sprintf("!%s@%d/%d", MarkLabel(m), m.StartNanos, d))
	return nil
}
func (l *treeLog) EndThread() error   { l.out = append(l.out, "end"); return nil }
func (l *treeLog) Close(Totals) error { return nil }

// TestPreOrder feeds calls in the order they ended, with marks, a dropped call and a call
// that never reaches depth 0, and checks the replay: pre-order, marks where they happened.
func TestPreOrder(t *testing.T) {
	l := &treeLog{}
	p := PreOrder(l)
	call := func(name string, start, dur uint64, depth int) {
		p.Call(&Call{Name: name, StartNanos: start, DurNanos: dur, Depth: depth})
	}
	mark := func(start uint64, n uint64) { p.Mark(&stream.Mark{Kind: stream.MarkLost, StartNanos: start, Count: n}) }
	p.BeginThread(&stream.Header{}, &stream.Thread{})
	mark(5, 1)           // inside O, before its first child: O's record comes last
	call("a", 10, 0, 2)  // zero-length, under the dropped call
	p.Skip(1)            // a dropped call [10,20]: a goes up to O
	call("b", 20, 5, 1)  // [20,25): the mark at 25 is after it
	mark(25, 2)          // after b, inside O
	call("O", 0, 100, 0) // completes the tree
	mark(150, 3)         // between outermost calls
	call("c", 200, 5, 1) // never reaches depth 0
	p.EndThread()
	got := strings.Join(l.out, " ")
	want := "thread +O@0/0 ![lost 1]@5/1 +a@10/1 -a +b@20/1 -b ![lost 2]@25/1 -O ![lost 3]@150/0 +c@200/0 -c end"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
