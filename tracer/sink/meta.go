// What every sink is told about the traced program (Meta) and the timelines' default budgets.

package sink

import (
	"path/filepath"
	"strconv"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// Meta is what the outputs say about the traced program beyond the records.
type Meta struct {
	Program   string // process name shown by the viewers ("" for the base name of Path, or "pid N")
	Path      string // the program's executable, pprof's main mapping
	TimeNanos int64  // wall clock of the trace's base tick, Unix ns (0: unknown)
	Budget    int    // timelines (json, perfetto, speedscope): keep at most this many calls, the longest; 0 the format's DefaultBudget, < 0 every call
}

func (m Meta) ProcessName(h *stream.Header) string {
	switch {
	case m.Program != "":
		return m.Program
	case h.Program != "": // streams name their process
		return h.Program
	case m.Path != "":
		return filepath.Base(m.Path)
	}
	return "pid " + strconv.FormatUint(h.PID, 10)
}

// The timelines' default budgets (Meta.Budget 0): the number of calls each keeps unless told
// otherwise. Chrome JSON 1 M (150 MB of JSON), speedscope 2 M (its .speedscope.json, 147 MB,
// opens in 10 s in Chromium on a 2-core machine; 4 M take 42 s), Perfetto 20 M (7-10 bytes a
// call in the file, about 27 inflated: 540 MB that the browser's trace processor holds in its
// 2 GB). The engine's budget.go says what a budget does.
const (
	ChromeBudget     = 1_000_000
	PerfettoBudget   = 20_000_000
	SpeedscopeBudget = 2_000_000
)

// budget resolves Meta.Budget for a timeline whose default is def: 0 def, < 0 none.
func (m Meta) budget(def int) uint64 {
	switch {
	case m.Budget < 0:
		return 0
	case m.Budget == 0:
		return uint64(def)
	}
	return uint64(m.Budget)
}
