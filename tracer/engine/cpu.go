package engine

import (
	"sort"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// resolveCPU puts the stream's cpu frames on the trace's timeline, by thread, each thread's
// samples in time order. A frame lists only the threads whose counters changed since their
// previous entry: where a thread's counters changed after frames that left it out, the sample
// the previous frame did not write (the same counters, at that frame's tick) is put back, so
// that what the thread did between two frames is not spread over the frames it sat out. A
// thread opt leaves out is left out, and so is a frame before the trace's origin.
func (sf *streamFile) resolveCPU(opt Options) map[uint64]*stream.ThreadCPU {
	if len(sf.cpu) == 0 {
		return nil
	}
	var frames []stream.StreamCPU // those from the trace's origin on (a ring dump's may be older than its calls)
	for _, f := range sf.cpu {
		if sf.clock.mono(f.Tick) >= sf.base {
			frames = append(frames, f)
		}
	}
	sort.SliceStable(frames, func(i, j int) bool { return frames[i].Tick < frames[j].Tick })
	out := map[uint64]*stream.ThreadCPU{}
	lastTick := map[uint64]uint64{}
	for k, f := range frames {
		ns := sf.ns(f.Tick)
		for _, e := range f.Entries {
			if st := sf.byTID[e.TID]; st != nil && !threadSelected(opt.Threads, &st.t) {
				continue
			}
			tc := out[e.TID]
			if tc == nil {
				tc = &stream.ThreadCPU{TID: e.TID}
				out[e.TID] = tc
			}
			if n := len(tc.Samples); n > 0 && k > 0 && lastTick[e.TID] < frames[k-1].Tick {
				carry := tc.Samples[n-1]
				carry.Nanos = sf.ns(frames[k-1].Tick)
				tc.Samples = append(tc.Samples, carry)
			}
			tc.Samples = append(tc.Samples, stream.CPUSample{Nanos: ns, RunningNanos: e.Running,
				RunnableNanos: e.Runnable, Slices: e.Slices, Known: e.Known})
			lastTick[e.TID] = f.Tick
		}
	}
	return out
}
