package sink

import (
	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
	"google.golang.org/protobuf/encoding/protowire"
)

// Async hops (stream.Header.Hops) on the timelines: a flow from the call that enqueued the
// work (the call enclosing the enqueue innermost) to the call that ran it (the first call of
// each run), and the latter labelled with who enqueued it. Perfetto: flow_ids on the
// enqueuing call's begin, terminating_flow_ids on the executed call's and the debug
// annotation enqueued_by (a flow per run: trace_processor binds a TrackEvent's flows to its
// own slice). Chrome JSON: a flow start ("ph":"s") at the enqueuing call's begin and a flow end
// ("ph":"f", "bp":"e") at the executed call's, each bound to the slice that encloses it,
// which begins at that time, and args.enqueued_by on the executed call's begin.

// TrackEvent's flow fields (track_event.proto), repeated fixed64.
const (
	pfEventFlowIDs    = 47 // TrackEvent.flow_ids
	pfEventTermFlowID = 48 // TrackEvent.terminating_flow_ids
)

// hopsOf is the hops a call starts from and lands on, or false when it has none.
func hopsOf(h *stream.Hops, tid uint64, c *engine.Call) (from []*stream.Hop, ran []*stream.Hop, runs []int, ok bool) {
	if h.Len() == 0 {
		return nil, nil, nil, false
	}
	from = h.From(tid, c.StartNanos, c.Depth)
	ran, runs = h.Ran(tid, c.StartNanos, c.Depth)
	return from, ran, runs, len(from) > 0 || len(ran) > 0
}

// pfHopFields is the TrackEvent fields of a call's hops.
func pfHopFields(pid uint64, from, ran []*stream.Hop, runs []int) []byte {
	var b []byte
	for _, hp := range from {
		for r := range hp.Runs {
			b = protowire.AppendTag(b, pfEventFlowIDs, protowire.Fixed64Type)
			b = protowire.AppendFixed64(b, stream.FlowID(pid, hp.ID, r))
		}
	}
	for i, hp := range ran {
		if !hp.Enqueued {
			continue
		}
		b = protowire.AppendTag(b, pfEventTermFlowID, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, stream.FlowID(pid, hp.ID, runs[i]))
	}
	for _, hp := range ran {
		if hp.Enqueued {
			a := appendStr(appendStr(nil, pfDebugName, "enqueued_by"), pfDebugStr, hopBy(hp))
			b = appendMsg(b, pfEventDebug, a)
			break
		}
	}
	return b
}

// hopBy is what an executed call's enqueued_by says: "METHOD on thread THREAD", or "thread
// THREAD" when no call enclosed the enqueue.
func hopBy(hp *stream.Hop) string {
	if hp.EnqueuedBy == "" {
		return "thread " + hp.EnqThread
	}
	return hp.EnqueuedBy + " on thread " + hp.EnqThread
}

// writeHopBegin writes an executed call's begin with args.enqueued_by, then the flow events
// of its hops (see writeBegin).
func (s *ChromeSink) writeHopBegin(call *engine.Call, from, ran []*stream.Hop, runs []int) error {
	b := append(s.callHead(false, call, call.StartNanos), s.pt...)
	b = append(b, `,"cat":"objc"`...)
	for _, hp := range ran {
		if hp.Enqueued {
			b = append(b, `,"args":{"enqueued_by":`...)
			b = appendJSONString(b, hopBy(hp))
			b = append(b, '}')
			break
		}
	}
	b = append(b, '}')
	s.gBegins = append(s.gBegins, call.Name)
	if err := s.evEnd(b); err != nil {
		return err
	}
	flow := func(ph byte, id uint64) error {
		b := s.head(s.evBegin(), ph, "hop", call.StartNanos)
		b = append(b, `,"cat":"hop","bp":"e","id":`...)
		b = appendDec(b, id)
		b = append(b, '}')
		return s.evEnd(b)
	}
	for _, hp := range from {
		for r := range hp.Runs {
			if err := flow('s', stream.FlowID(s.pid, hp.ID, r)); err != nil {
				return err
			}
		}
	}
	for i, hp := range ran {
		if hp.Enqueued {
			if err := flow('f', stream.FlowID(s.pid, hp.ID, runs[i])); err != nil {
				return err
			}
		}
	}
	return nil
}
