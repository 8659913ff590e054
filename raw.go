package msgtrace

/*
#include "rt.h"
*/
import "C"

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/msgtrace/msgtrace/tracer"
)

// Namer names what the interposers recorded; *objc.Runtime is one.
type Namer interface {
	ObjectClass(obj uintptr) uintptr
	Superclass(cls uintptr) uintptr
	IsMetaClass(cls uintptr) bool
	ClassName(cls uintptr) string
	SelectorName(sel uintptr) string
}

// The clock reference for converting ticks: taken when the package initialises.
var (
	startTicks = uint64(C.msgtrace_now_ticks())
	startTime  = time.Now()
)

// tickRatio returns ns per tick as num/den: the hardware frequency where there is one, else the
// counter calibrated against the monotonic clock since the package started (at least 5 ms:
// both clocks are read to well under a microsecond, so the error stays below 1e-4). Without
// records there is nothing to time and no wait.
func tickRatio(records int) (num, den uint64) {
	if hz := uint64(C.msgtrace_tick_hz()); hz != 0 {
		return 1_000_000_000, hz
	}
	if records == 0 {
		return 1, 1
	}
	if d := time.Since(startTime); d < 5*time.Millisecond {
		time.Sleep(5*time.Millisecond - d)
	}
	ns := uint64(time.Since(startTime).Nanoseconds())
	ticks := uint64(C.msgtrace_now_ticks()) - startTicks
	if ticks == 0 {
		return 1, 1
	}
	return ns, ticks
}

// WriteRaw writes every registered thread's records as a raw dump (tracer's format v1),
// naming classes and selectors with nm in this process: super calls are named by the class
// whose method ran, tagged-pointer receivers by their class. Records keep being written while
// this runs; those past each thread's count at the snapshot are not in the dump.
func WriteRaw(w io.Writer, nm Namer) error {
	var f Flusher
	_, err := f.WriteRaw(w, nm)
	return err
}

// Flusher writes raw dumps that each hold what was recorded since its previous dump, so that
// threads that keep running lose nothing between flushes. Its methods are safe to call from
// several goroutines.
type Flusher struct {
	mu   sync.Mutex
	done map[uintptr]flushed // thread's record buffer -> what earlier dumps held
}

// flushed is how much of a thread earlier dumps covered.
type flushed struct{ records, dropped, overflow uint64 }

// WriteRaw writes the records made since the previous call (all of them the first time) as
// WriteRaw does, and returns how many it wrote. Calls still running are recorded when they
// end, so they appear in a later dump.
func (f *Flusher) WriteRaw(w io.Writer, nm Namer) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done == nil {
		f.done = map[uintptr]flushed{}
	}
	n := int(C.msgtrace_snapshot(nil, 0))
	snaps := make([]C.struct_mt_snapshot, n+16)
	n = int(C.msgtrace_snapshot(&snaps[0], C.size_t(len(snaps))))
	snaps = snaps[:min(n, len(snaps))]
	written := 0
	total := 0
	for _, s := range snaps {
		total += int(uint64(s.count) - f.done[uintptr(unsafe.Pointer(s.records))].records)
	}
	num, den := tickRatio(total)
	out := tracer.NewWriter(w, tracer.Header{PID: uint64(os.Getpid()), TickNum: num, TickDen: den, BaseTick: startTicks})

	type threadRecs struct {
		t    tracer.Thread
		recs []tracer.Record
	}
	var threads []threadRecs
	classes := map[uint64]bool{}
	sels := map[uint64]bool{}
	canon := map[uint64]uint64{} // class word (with flags) -> class whose method ran
	for _, s := range snaps {
		buf := uintptr(unsafe.Pointer(s.records))
		prev := f.done[buf]
		recs := unsafe.Slice((*tracer.Record)(unsafe.Pointer(s.records)), int(s.count))[prev.records:]
		f.done[buf] = flushed{uint64(s.count), uint64(s.dropped), uint64(s.overflow)}
		written += len(recs)
		tr := threadRecs{t: tracer.Thread{TID: uint64(s.tid), Dropped: uint64(s.dropped) - prev.dropped, Overflow: uint64(s.overflow) - prev.overflow,
			Main: s.main != 0, Name: C.GoString(&s.name[0])}, recs: make([]tracer.Record, len(recs))}
		for i, r := range recs {
			flagged := r.Class &^ (0xfff << 48) // class bits and flags, without the depth
			c, ok := canon[flagged]
			if !ok {
				key := r.ClassKey()
				switch {
				case r.Flags()&tracer.FlagTagged != 0:
					c = uint64(nm.ObjectClass(uintptr(key)))
				case r.Flags()&tracer.FlagSuper != 0:
					c = uint64(nm.Superclass(uintptr(key)))
				default:
					c = key
				}
				canon[flagged] = c
			}
			r.Class = c&(1<<48-1) | r.Class&(0xffff<<48)
			tr.recs[i] = r
			classes[c] = true
			sels[r.Sel] = true
		}
		threads = append(threads, tr)
	}
	var names []tracer.NameEntry
	for c := range classes {
		kind := uint32(tracer.NameClass)
		if nm.IsMetaClass(uintptr(c)) {
			kind = tracer.NameMetaclass
		}
		names = append(names, tracer.NameEntry{Key: c, Kind: kind, Name: nm.ClassName(uintptr(c))})
	}
	for s := range sels {
		names = append(names, tracer.NameEntry{Key: s, Kind: tracer.NameSelector, Name: nm.SelectorName(uintptr(s))})
	}
	sort.Slice(names, func(i, j int) bool {
		return names[i].Key < names[j].Key || names[i].Key == names[j].Key && names[i].Kind < names[j].Kind
	})
	out.WriteNames(names)
	sort.Slice(threads, func(i, j int) bool { return threads[i].t.TID < threads[j].t.TID })
	for _, t := range threads {
		if t.t.Name == "" {
			t.t.Name = threadName(t.t.TID)
		}
		out.WriteThread(t.t, t.recs)
	}
	if err := out.Close(); err != nil {
		return written, fmt.Errorf("writing the raw trace: %w", err)
	}
	return written, nil
}

// threadName reads a Linux thread's name; "" elsewhere.
func threadName(tid uint64) string {
	b, err := os.ReadFile("/proc/self/task/" + strconv.FormatUint(tid, 10) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
