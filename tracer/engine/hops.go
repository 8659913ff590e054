package engine

import "github.com/msgtrace/msgtrace/tracer/stream"

// Async hops: the marks of work handed to another thread (stream.MarkHopEnqueue, HopBegin,
// HopEnd, sharing the hop's id) made into the process's stream.Hops before pass 2, from the
// threads that have any (pass 1 counts them): each thread's events again, in the order its
// calls ended. Sinks get the index with the header and never the marks.
//
// In end order the call that encloses an enqueue innermost is the first call after the mark
// that started before it (a call that ends later and started earlier): marks wait on a stack
// sorted by time until such a call comes. A mark resolved by a framework's enqueuing method
// waits on, at that call's start, for the call around it (up to enqueueChain calls up), which
// names who asked for the work. A run's call is the earliest-starting call between its begin
// and end marks (an outermost call of the run).

// enqueueChain is how many calls around an enqueue are looked at for the one that asked.
const enqueueChain = 4

// enqueueMethods are the framework methods that enqueue work on behalf of their caller
// (gnustep-base's, and Foundation's names for the same): "enqueued by" names the call around
// them.
var enqueueMethods = map[string]bool{
	"-[GSRunLoopThreadInfo addPerformer:]":                                        true,
	"-[NSObject performSelector:onThread:withObject:waitUntilDone:]":              true,
	"-[NSObject performSelector:onThread:withObject:waitUntilDone:modes:]":        true,
	"-[NSObject performSelectorOnMainThread:withObject:waitUntilDone:]":           true,
	"-[NSObject performSelectorOnMainThread:withObject:waitUntilDone:modes:]":     true,
	"-[NSObject performSelectorInBackground:withObject:]":                         true,
	"-[NSObject performSelector:withObject:afterDelay:]":                          true,
	"-[NSObject performSelector:withObject:afterDelay:inModes:]":                  true,
	"-[NSRunLoop addTimer:forMode:]":                                              true,
	"+[NSTimer scheduledTimerWithTimeInterval:target:selector:userInfo:repeats:]": true,
	"+[NSTimer scheduledTimerWithTimeInterval:invocation:repeats:]":               true,
	"-[NSOperationQueue addOperation:]":                                           true,
	"-[NSOperationQueue addOperationWithBlock:]":                                  true,
	"-[NSOperationQueue addOperations:waitUntilFinished:]":                        true,
	"-[NSThread start]": true,
	"+[NSThread detachNewThreadSelector:toTarget:withObject:]":                       true,
	"-[NSNotificationQueue enqueueNotification:postingStyle:]":                       true,
	"-[NSNotificationQueue enqueueNotification:postingStyle:coalesceMask:forModes:]": true,
}

// hopPending is an enqueue mark waiting for the calls around it.
type hopPending struct {
	hop   int    // index in the list
	tick  uint64 // the mark's, then the start of the last call found around it
	chain []uint64
}

// hopOpenRun is a run whose end mark has not come yet.
type hopOpenRun struct {
	hop, run int
	begin    uint64
	first    stream.StreamEvent // its earliest-starting call so far (Type -1: none)
}

// resolveHops reads the hops of a stream's threads (after pass 1 settled them).
func (sf *streamFile) resolveHops() (*stream.Hops, error) {
	var list []stream.Hop
	pos := map[uint64]int{}
	hop := func(id uint64) int {
		if i, ok := pos[id]; ok {
			return i
		}
		list = append(list, stream.Hop{ID: id, EnqCall: stream.CallRef{Depth: -1}})
		pos[id] = len(list) - 1
		return len(list) - 1
	}
	type chainOf struct {
		hop   int
		chain []uint64 // method ids of the calls around the enqueue, innermost first
	}
	var chains []chainOf
	for _, st := range sf.threads {
		if st.hopMarks == 0 {
			continue
		}
		label := ThreadLabel(&st.t)
		var pend []hopPending
		var open []hopOpenRun
		var e stream.StreamEvent
		last := uint64(0)
		finish := func(p hopPending) {
			if len(p.chain) > 0 {
				chains = append(chains, chainOf{hop: p.hop, chain: p.chain})
			}
		}
		// a call (in end order): the runs it starts in, the enqueues it encloses
		call := func(e *stream.StreamEvent) {
			for k := range open {
				if o := &open[k]; e.Start >= o.begin && (o.first.Type < 0 || e.Start < o.first.Start ||
					e.Start == o.first.Start && e.Depth < o.first.Depth) {
					o.first = *e
				}
			}
			n := len(pend)
			for n > 0 && pend[n-1].tick >= e.Start {
				n--
			}
			if n == len(pend) {
				return
			}
			moved := append([]hopPending(nil), pend[n:]...)
			pend = pend[:n]
			for _, p := range moved {
				if len(p.chain) == 0 {
					list[p.hop].EnqCall = stream.CallRef{StartNanos: sf.ns(e.Start), Depth: int(e.Depth)}
				}
				p.chain = append(p.chain, e.ID)
				if len(p.chain) < enqueueChain && e.Depth > 0 {
					p.tick = e.Start
					pend = append(pend, p)
				} else {
					finish(p)
				}
			}
		}
		for _, fr := range st.frames {
			it, err := sf.events(fr.off)
			if err != nil {
				return nil, err
			}
			for {
				if ok, err := it.Next(&e); err != nil {
					return nil, errChanged
				} else if !ok {
					break
				}
				last = max(last, e.End)
				if e.Type == stream.EventMark {
					switch stream.MarkKind(e.ID) {
					case stream.MarkHopEnqueue:
						i := hop(e.Count)
						h := &list[i]
						h.Enqueued, h.EnqTID, h.EnqThread, h.EnqNanos = true, st.t.TID, label, sf.ns(e.End)
						pend = append(pend, hopPending{hop: i, tick: e.End})
					case stream.MarkHopBegin:
						i := hop(e.Count)
						list[i].Runs = append(list[i].Runs, stream.HopRun{TID: st.t.TID, Thread: label, BeginNanos: sf.ns(e.End), Call: stream.CallRef{Depth: -1}})
						open = append(open, hopOpenRun{hop: i, run: len(list[i].Runs) - 1, begin: e.End, first: stream.StreamEvent{Type: -1}})
					case stream.MarkHopEnd:
						for k := len(open) - 1; k >= 0; k-- {
							if list[open[k].hop].ID != e.Count {
								continue
							}
							sf.closeRun(list, &open[k], e.End, true)
							open = append(open[:k], open[k+1:]...)
							break
						}
					}
					continue
				}
				call(&e)
			}
		}
		if st.openOff >= 0 { // the calls still running at the end, innermost first
			oc, err := sf.openCalls(st, &sf.w, st.frames)
			if err != nil {
				return nil, err
			}
			for i := len(oc) - 1; i >= 0; i-- {
				call(&stream.StreamEvent{Type: stream.EventCall, ID: oc[i].id, Start: oc[i].start, End: last, Depth: oc[i].depth})
			}
		}
		for _, p := range pend { // no call around them
			finish(p)
		}
		for k := range open { // never returned: to the end of the trace
			sf.closeRun(list, &open[k], max(sf.maxTick, last, open[k].begin), false)
		}
	}
	if len(list) == 0 {
		return nil, nil
	}
	for _, c := range chains { // names, past the framework's enqueuing methods
		h := &list[c.hop]
		name, _, _ := sf.method(c.chain[0])
		h.EnqCall.Name, h.EnqueuedBy = name, name
		for _, id := range c.chain {
			n, _, _ := sf.method(id)
			h.EnqueuedBy = n
			if !enqueueMethods[n] {
				break
			}
		}
	}
	return stream.NewHops(list), nil
}

// closeRun ends a run at tick end: its times and its call.
func (sf *streamFile) closeRun(list []stream.Hop, o *hopOpenRun, end uint64, ended bool) {
	r := &list[o.hop].Runs[o.run]
	r.EndNanos, r.Ended = sf.ns(end), ended
	if o.first.Type >= 0 {
		name, _, _ := sf.method(o.first.ID)
		r.Call = stream.CallRef{StartNanos: sf.ns(o.first.Start), Depth: int(o.first.Depth), Name: name}
	}
}
