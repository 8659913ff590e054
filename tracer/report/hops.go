package report

import "github.com/msgtrace/msgtrace/tracer/stream"

// HopRef says who handed a call's work to its thread: the call ran inside a hop's run (work
// enqueued by performSelector:onThread:, a timer, an operation, dispatch_async, ...; the
// innermost one when runs nest), and this is where that work was enqueued.
type HopRef struct {
	Method string `json:"method,omitempty"` // the call that enqueued it ("" when none was recorded around the enqueue)
	Thread string `json:"thread"`           // the enqueuing thread
	TID    uint64 `json:"tid"`
	Hop    uint64 `json:"hop"`           // the recorder's id of the hop
	Ran    string `json:"ran,omitempty"` // the first call the work item ran (the flow's target)
}

// String is "enqueued by METHOD on thread THREAD" (or "enqueued on thread THREAD").
func (h *HopRef) String() string {
	if h.Method == "" {
		return "enqueued on thread " + h.Thread
	}
	return "enqueued by " + h.Method + " on thread " + h.Thread
}

// hopRef is who enqueued the work the call starting at start on thread tid belongs to: nil
// when it ran in no hop's run, or the hop's enqueue was not recorded.
func hopRef(hs *stream.Hops, tid, start uint64) *HopRef {
	hp, run := hs.Within(tid, start)
	if hp == nil || !hp.Enqueued {
		return nil
	}
	return &HopRef{Method: hp.EnqueuedBy, Thread: hp.EnqThread, TID: hp.EnqTID, Hop: hp.ID, Ran: run.Call.Name}
}
