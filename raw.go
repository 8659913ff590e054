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
// counter calibrated against the monotonic clock since the package started (at least 20 ms).
func tickRatio() (num, den uint64) {
	if hz := uint64(C.msgtrace_tick_hz()); hz != 0 {
		return 1_000_000_000, hz
	}
	if d := time.Since(startTime); d < 20*time.Millisecond {
		time.Sleep(20*time.Millisecond - d)
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
// this runs; those past each thread's count at the snapshot go to the next dump.
func WriteRaw(w io.Writer, nm Namer) error {
	n := int(C.msgtrace_snapshot(nil, 0))
	snaps := make([]C.struct_mt_snapshot, n+16)
	n = int(C.msgtrace_snapshot(&snaps[0], C.size_t(len(snaps))))
	snaps = snaps[:min(n, len(snaps))]
	num, den := tickRatio()
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
		recs := unsafe.Slice((*tracer.Record)(unsafe.Pointer(s.records)), int(s.count))
		tr := threadRecs{t: tracer.Thread{TID: uint64(s.tid), Dropped: uint64(s.dropped), Overflow: uint64(s.overflow),
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
		return fmt.Errorf("writing the raw trace: %w", err)
	}
	return nil
}

// threadName reads a Linux thread's name; "" elsewhere.
func threadName(tid uint64) string {
	b, err := os.ReadFile("/proc/self/task/" + strconv.FormatUint(tid, 10) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
