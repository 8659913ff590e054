package selftest

/*
#cgo CFLAGS: -I${SRCDIR}/../..
#include <stdlib.h>
#include "drain_encode.h"

static void enc_free(struct mt_buf *b) { free(b->p); }
*/
import "C"

import (
	"unsafe"

	"github.com/msgtrace/msgtrace/tracer/stream"
)

// The recorder's stream encoder (drain_encode.c in the msgtrace package, linked into its
// tests), called with the values given: each function returns the frame the C encoder makes,
// to compare byte for byte with stream.StreamWriter's.

func bytesOf(b *C.struct_mt_buf) []byte {
	defer C.enc_free(b)
	return C.GoBytes(unsafe.Pointer(b.p), C.int(b.n))
}

// cstr is a C copy of s, freed by the returned function.
func cstr(s string) (*C.char, func()) {
	c := C.CString(s)
	return c, func() { C.free(unsafe.Pointer(c)) }
}

// EncodeProcess is the C encoder's process frame.
func EncodeProcess(p stream.StreamProcess) []byte {
	var out, pl C.struct_mt_buf
	defer C.enc_free(&pl)
	path, f1 := cstr(p.Path)
	defer f1()
	name, f2 := cstr(p.Name)
	defer f2()
	arch, f3 := cstr(p.Arch)
	defer f3()
	os, f4 := cstr(p.OS)
	defer f4()
	f := C.struct_mt_process_frame{pid: C.uint64_t(p.PID), ppid: C.uint64_t(p.PPID), path: path, name: name, arch: arch, os: os, mode: C.uint64_t(p.Mode)}
	C.mt_enc_process(&out, &pl, &f)
	return bytesOf(&out)
}

// EncodeClock is the C encoder's clock frame.
func EncodeClock(c stream.ClockSample) []byte {
	var out, pl C.struct_mt_buf
	defer C.enc_free(&pl)
	f := C.struct_mt_clock_frame{tick: C.uint64_t(c.Tick), mono_ns: C.uint64_t(c.MonoNanos), wall_ns: C.uint64_t(c.WallNanos), rate_num: C.uint64_t(c.RateNum), rate_den: C.uint64_t(c.RateDen)}
	C.mt_enc_clock(&out, &pl, &f)
	return bytesOf(&out)
}

// EncodeMethods is the C encoder's methods frame.
func EncodeMethods(ms ...stream.StreamMethod) []byte {
	var out, pl C.struct_mt_buf
	defer C.enc_free(&pl)
	for _, m := range ms {
		cls, f1 := cstr(m.Class)
		sel, f2 := cstr(m.Selector)
		C.mt_enc_method(&pl, C.uint64_t(m.ID), C.uint64_t(m.Flags), cls, sel)
		f1()
		f2()
	}
	C.mt_enc_methods(&out, &pl)
	return bytesOf(&out)
}

// EncodeThread is the C encoder's thread frame.
func EncodeThread(t stream.StreamThread) []byte {
	var out, pl C.struct_mt_buf
	defer C.enc_free(&pl)
	name, f := cstr(t.Name)
	defer f()
	C.mt_enc_thread(&out, &pl, C.uint64_t(t.TID), C.uint64_t(t.Flags), name)
	return bytesOf(&out)
}

// EncodeEvents is the C encoder's events frame (one frame: the events must fit).
func EncodeEvents(tid, prevEnd uint64, evs []stream.StreamEvent) []byte {
	var out, pl C.struct_mt_buf
	defer C.enc_free(&pl)
	C.mt_enc_events_begin(&pl, C.uint64_t(tid), C.uint64_t(prevEnd))
	prev := C.uint64_t(prevEnd)
	for _, e := range evs {
		end, dur := C.uint64_t(e.End), C.uint64_t(e.End-e.Start)
		switch e.Type {
		case stream.EventMark:
			C.mt_enc_mark(&pl, &prev, C.uint64_t(e.ID), end, dur, C.uint64_t(e.Count))
		default:
			unwound := C.int(0)
			if e.Type == stream.EventUnwound {
				unwound = 1
			}
			C.mt_enc_call(&pl, &prev, C.uint64_t(e.ID), unwound, end, dur, C.uint64_t(e.Depth))
		}
	}
	C.mt_enc_events_end(&out, &pl)
	return bytesOf(&out)
}

// EncodeOpen is the C encoder's open frame.
func EncodeOpen(tid, tick uint64, calls []stream.OpenCall) []byte {
	var out, pl C.struct_mt_buf
	defer C.enc_free(&pl)
	C.mt_enc_open_begin(&pl, C.uint64_t(tid), C.uint64_t(tick))
	for _, c := range calls {
		C.mt_enc_open_call(&pl, C.uint64_t(c.ID), C.uint64_t(tick-c.Start), C.uint64_t(c.Depth))
	}
	C.mt_enc_open_end(&out, &pl)
	return bytesOf(&out)
}

// EncodeEnd is the C encoder's end frame.
func EncodeEnd(c stream.StreamCounters) []byte {
	var out, pl C.struct_mt_buf
	defer C.enc_free(&pl)
	f := C.struct_mt_end_frame{calls: C.uint64_t(c.Calls), lost: C.uint64_t(c.Lost), overflow: C.uint64_t(c.Overflow), waits: C.uint64_t(c.Waits), wait_ticks: C.uint64_t(c.TicksWaited), unwritten: C.uint64_t(c.Unwritten)}
	C.mt_enc_end(&out, &pl, &f)
	return bytesOf(&out)
}

// EncodeInstant is the C encoder's instant frame.
func EncodeInstant(in stream.StreamInstant) []byte {
	var out, pl C.struct_mt_buf
	defer C.enc_free(&pl)
	name, free := cstr(in.Name)
	defer free()
	f := C.struct_mt_instant_frame{tid: C.uint64_t(in.TID), time: C.uint64_t(in.Time), precision: C.uint64_t(in.Precision),
		clock: C.uint8_t(in.Clock), kind: C.uint8_t(in.Kind), name: name}
	C.mt_enc_instant(&out, &pl, &f)
	return bytesOf(&out)
}

// EncodeCPU is the C encoder's cpu frame.
func EncodeCPU(tick uint64, es []stream.CPUEntry) []byte {
	var out, pl C.struct_mt_buf
	defer C.enc_free(&pl)
	C.mt_enc_cpu_begin(&pl, C.uint64_t(tick))
	for _, e := range es {
		C.mt_enc_cpu_thread(&pl, C.uint64_t(e.TID), C.uint64_t(e.Known), C.uint64_t(e.Running), C.uint64_t(e.Runnable), C.uint64_t(e.Slices))
	}
	C.mt_enc_cpu_end(&out, &pl)
	return bytesOf(&out)
}
