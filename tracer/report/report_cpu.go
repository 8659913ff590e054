package report

import (
	"fmt"
	"sort"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// On-CPU and off-CPU time from the threads' CPU samples (stream.Header.CPU: the drain reads
// each recording thread's counters every 10 ms or more, MSGTRACE_CPU). A counter is taken to
// grow evenly between two samples, so a call's running time is the thread's running counter
// interpolated at the call's end less at its start: exact where the call starts and ends at
// samples, off by at most what the thread ran in the two sample intervals around its start and
// its end (Resolution) otherwise. Sampling starts at the thread's first traced call (within a
// period) and ends at its last change before the thread exits: the part of a call outside that
// is not counted (SampledNanos says how much is).

// CallCPU is how a call's time divides into running and not running.
type CallCPU struct {
	RunningNanos uint64 `json:"running_ns"` // on a CPU
	WaitingNanos uint64 `json:"waiting_ns"` // not running: runnable (waiting for a CPU) or blocked
	// RunnableNanos is the part of WaitingNanos the thread was runnable, on a run queue (not
	// blocked); nil where the counters do not say (Apple, a Linux thread read through its CPU
	// clock).
	RunnableNanos *uint64 `json:"runnable_ns,omitempty"`
	SampledNanos  uint64  `json:"sampled_ns"`    // the part of the call the samples cover: running + waiting
	Resolution    uint64  `json:"resolution_ns"` // the longest sample interval around its start or end
}

// ThreadCPU is what a thread's samples add up to, from its first sample to its last.
type ThreadCPU struct {
	RunningNanos  uint64  `json:"running_ns"`            // on a CPU
	RunnableNanos *uint64 `json:"runnable_ns,omitempty"` // runnable, waiting on a run queue (Linux)
	OffCPUNanos   uint64  `json:"off_cpu_ns"`            // neither: blocked, sleeping (with runnable, when not known)
	SampledNanos  uint64  `json:"sampled_ns"`            // from its first sample to its last
	Samples       int     `json:"samples"`
	// TotalRunningNanos is the thread's running time since it started (its last sample's).
	TotalRunningNanos uint64 `json:"total_running_ns"`
}

// cpuOf is a thread's samples, nil without.
func cpuOf(h *stream.Header, tid uint64) []stream.CPUSample {
	if tc := h.CPU[tid]; tc != nil {
		return tc.Samples
	}
	return nil
}

// cpuAt interpolates the thread's counters at t (between the first and the last sample):
// running, runnable, whether runnable is known, and the length of the sample interval t is in
// (0 at a sample).
func cpuAt(ss []stream.CPUSample, t uint64) (run, wait float64, waitKnown bool, gap uint64) {
	i := sort.Search(len(ss), func(i int) bool { return ss[i].Nanos >= t })
	b := ss[i]
	if b.Nanos == t || i == 0 {
		return float64(b.RunningNanos), float64(b.RunnableNanos), b.Known&stream.CPURunnable != 0, 0
	}
	a := ss[i-1]
	f := float64(t-a.Nanos) / float64(b.Nanos-a.Nanos)
	lerp := func(x, y uint64) float64 {
		if y < x { // not expected: the counters only grow
			return float64(x)
		}
		return float64(x) + f*float64(y-x)
	}
	known := a.Known&b.Known&stream.CPURunnable != 0
	return lerp(a.RunningNanos, b.RunningNanos), lerp(a.RunnableNanos, b.RunnableNanos), known, b.Nanos - a.Nanos
}

// callCPU splits the time [start, start+dur) of a call on the thread with samples ss; nil when
// no part of it is between two samples.
func callCPU(ss []stream.CPUSample, start, dur uint64) *CallCPU {
	if len(ss) < 2 || dur == 0 {
		return nil
	}
	lo, hi := max(start, ss[0].Nanos), min(start+dur, ss[len(ss)-1].Nanos)
	if hi <= lo {
		return nil
	}
	r0, w0, k0, g0 := cpuAt(ss, lo)
	r1, w1, k1, g1 := cpuAt(ss, hi)
	span := float64(hi - lo)
	run := min(max(r1-r0, 0), span)
	c := &CallCPU{RunningNanos: uint64(run + 0.5), SampledNanos: hi - lo, Resolution: max(g0, g1)}
	c.RunningNanos = min(c.RunningNanos, c.SampledNanos)
	c.WaitingNanos = c.SampledNanos - c.RunningNanos
	if k0 && k1 {
		w := min(uint64(min(max(w1-w0, 0), span)+0.5), c.WaitingNanos)
		c.RunnableNanos = &w
	}
	return c
}

// threadCPU adds up a thread's samples; nil without two.
func threadCPU(ss []stream.CPUSample) *ThreadCPU {
	if len(ss) < 2 {
		return nil
	}
	a, b := ss[0], ss[len(ss)-1]
	t := &ThreadCPU{SampledNanos: b.Nanos - a.Nanos, Samples: len(ss), TotalRunningNanos: b.RunningNanos}
	if b.RunningNanos > a.RunningNanos {
		t.RunningNanos = min(b.RunningNanos-a.RunningNanos, t.SampledNanos)
	}
	off := t.SampledNanos - t.RunningNanos
	if a.Known&b.Known&stream.CPURunnable != 0 {
		w := uint64(0)
		if b.RunnableNanos > a.RunnableNanos {
			w = min(b.RunnableNanos-a.RunnableNanos, off)
		}
		t.RunnableNanos = &w
		off -= w
	}
	t.OffCPUNanos = off
	return t
}

// Phrase says the split in words, times in ms: "3.000 ms running, 42.000 ms waiting (of which
// 1.000 ms runnable)", with how much of the call the samples cover when not all of it.
func (c *CallCPU) Phrase(durNanos uint64) string {
	s := fmt.Sprintf("%s ms running, %s ms waiting", msText(c.RunningNanos), msText(c.WaitingNanos))
	if c.RunnableNanos != nil {
		s += fmt.Sprintf(" (%s ms of it runnable, waiting for a CPU)", msText(*c.RunnableNanos))
	}
	if c.SampledNanos < durNanos {
		s += fmt.Sprintf(" in the %s ms sampled", msText(c.SampledNanos))
	}
	return s + fmt.Sprintf("; CPU samples %s ms apart around it", msText(c.Resolution))
}

// Phrase says a thread's totals in words, times in ms.
func (t *ThreadCPU) Phrase() string {
	s := fmt.Sprintf("%s ms running", msText(t.RunningNanos))
	if t.RunnableNanos != nil {
		s += fmt.Sprintf(", %s ms runnable", msText(*t.RunnableNanos))
	}
	return s + fmt.Sprintf(", %s ms off CPU over %s ms sampled (%d samples; %s ms running since it started)",
		msText(t.OffCPUNanos), msText(t.SampledNanos), t.Samples, msText(t.TotalRunningNanos))
}

func msText(ns uint64) string { return fmt.Sprintf("%.3f", float64(ns)/1e6) }
