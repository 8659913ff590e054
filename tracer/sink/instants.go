package sink

import (
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// instantQueue hands a timeline sink a thread's instants (those set on it) in time order as
// the thread's events go by, so that the output stays in time order per thread.
type instantQueue struct {
	list []stream.Instant
	next int
}

// reset takes the instants of thread tid from h.
func (q *instantQueue) reset(h *stream.Header, tid uint64) {
	q.list, q.next = q.list[:0], 0
	for _, in := range h.Instants {
		if in.TID == tid && tid != 0 {
			q.list = append(q.list, in)
		}
	}
}

// before returns the next instant before ts, if any.
func (q *instantQueue) before(ts uint64) (*stream.Instant, bool) {
	if q.next < len(q.list) && q.list[q.next].Nanos < ts {
		q.next++
		return &q.list[q.next-1], true
	}
	return nil, false
}

// rest returns the next instant not handed out yet, if any.
func (q *instantQueue) rest() (*stream.Instant, bool) {
	if q.next < len(q.list) {
		q.next++
		return &q.list[q.next-1], true
	}
	return nil, false
}

// processInstants returns the process-wide instants of h.
func processInstants(h *stream.Header) []stream.Instant {
	var out []stream.Instant
	for _, in := range h.Instants {
		if in.TID == 0 {
			out = append(out, in)
		}
	}
	return out
}
