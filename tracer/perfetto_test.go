package tracer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// pfField is a field of the schema the test holds the output to.
type pfField struct {
	name string
	typ  protowire.Type
	msg  string // for a message field, its type
}

// pfSchema is the part of Perfetto's trace schema the output may use, written down from
// google/perfetto's protos (protos/perfetto/trace/trace.proto, trace_packet.proto,
// track_event/{track_event,track_descriptor,process_descriptor,thread_descriptor,
// counter_descriptor,debug_annotation}.proto, interned_data/interned_data.proto): message ->
// field number -> name, wire type, message type.
var pfSchema = map[string]map[protowire.Number]pfField{
	"Trace": {1: {"packet", protowire.BytesType, "TracePacket"}},
	"TracePacket": {
		8:  {"timestamp", protowire.VarintType, ""},
		10: {"trusted_packet_sequence_id", protowire.VarintType, ""},
		11: {"track_event", protowire.BytesType, "TrackEvent"},
		12: {"interned_data", protowire.BytesType, "InternedData"},
		13: {"sequence_flags", protowire.VarintType, ""},
		60: {"track_descriptor", protowire.BytesType, "TrackDescriptor"},
	},
	"TrackDescriptor": {
		1: {"uuid", protowire.VarintType, ""},
		2: {"name", protowire.BytesType, "string"},
		3: {"process", protowire.BytesType, "ProcessDescriptor"},
		4: {"thread", protowire.BytesType, "ThreadDescriptor"},
		5: {"parent_uuid", protowire.VarintType, ""},
		8: {"counter", protowire.BytesType, "CounterDescriptor"},
	},
	"ProcessDescriptor": {1: {"pid", protowire.VarintType, ""}, 6: {"process_name", protowire.BytesType, "string"}},
	"ThreadDescriptor": {1: {"pid", protowire.VarintType, ""}, 2: {"tid", protowire.VarintType, ""},
		5: {"thread_name", protowire.BytesType, "string"}},
	"CounterDescriptor": {3: {"unit", protowire.VarintType, ""}},
	"TrackEvent": {
		4:  {"debug_annotations", protowire.BytesType, "DebugAnnotation"},
		9:  {"type", protowire.VarintType, ""},
		10: {"name_iid", protowire.VarintType, ""},
		11: {"track_uuid", protowire.VarintType, ""},
		30: {"counter_value", protowire.VarintType, ""},
	},
	"InternedData":    {2: {"event_names", protowire.BytesType, "EventName"}},
	"EventName":       {1: {"iid", protowire.VarintType, ""}, 2: {"name", protowire.BytesType, "string"}},
	"DebugAnnotation": {2: {"bool_value", protowire.VarintType, ""}, 3: {"uint_value", protowire.VarintType, ""}, 10: {"name", protowire.BytesType, "string"}},
}

// pfMsg is a decoded message: field name -> values (uint64, string or pfMsg).
type pfMsg map[string][]any

func (m pfMsg) u(name string) uint64 {
	if v := m[name]; len(v) > 0 {
		return v[0].(uint64)
	}
	return 0
}
func (m pfMsg) s(name string) string {
	if v := m[name]; len(v) > 0 {
		return v[0].(string)
	}
	return ""
}
func (m pfMsg) m(name string) pfMsg {
	if v := m[name]; len(v) > 0 {
		return v[0].(pfMsg)
	}
	return nil
}

// pfDecode decodes b as message typ, failing on anything the schema does not have.
func pfDecode(b []byte, typ string) (pfMsg, error) {
	out := pfMsg{}
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("%s: bad tag", typ)
		}
		b = b[n:]
		f, ok := pfSchema[typ][num]
		if !ok || f.typ != wt {
			return nil, fmt.Errorf("%s: field %d (wire type %d) not in the schema", typ, num, wt)
		}
		switch wt {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, fmt.Errorf("%s.%s: bad varint", typ, f.name)
			}
			out[f.name] = append(out[f.name], v)
			b = b[n:]
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, fmt.Errorf("%s.%s: bad length", typ, f.name)
			}
			b = b[n:]
			if f.msg == "string" {
				out[f.name] = append(out[f.name], string(v))
				continue
			}
			sub, err := pfDecode(v, f.msg)
			if err != nil {
				return nil, err
			}
			out[f.name] = append(out[f.name], sub)
		}
	}
	return out, nil
}

// pfImport reads a trace as Perfetto's trace processor does for these packets: interned
// names, tracks, and per thread track a stack of slices (BEGIN pushes, END pops); an instant
// is a zero-length slice; counters are values on their track.
type pfTrace struct {
	process  string
	pid      uint64
	threads  map[uint64]string // tid -> name
	slices   map[uint64][]importedSlice
	counters map[uint64][]string // tid -> "ts=value"
}

func pfImport(t *testing.T, b []byte) pfTrace {
	tr, err := pfDecode(b, "Trace")
	if err != nil {
		t.Fatal(err)
	}
	out := pfTrace{threads: map[uint64]string{}, slices: map[uint64][]importedSlice{}, counters: map[uint64][]string{}}
	names := map[uint64]string{}
	trackTid := map[uint64]uint64{}
	procUUID := map[uint64]uint64{} // process track uuid -> pid
	counterTid := map[uint64]uint64{}
	stacks := map[uint64][]int{}
	for i, p := range tr["packet"] {
		pk := p.(pfMsg)
		if pk.u("trusted_packet_sequence_id") != 1 {
			t.Fatalf("packet %d: sequence %d", i, pk.u("trusted_packet_sequence_id"))
		}
		if i == 0 && pk.u("sequence_flags") != 1 {
			t.Fatalf("first packet does not clear the sequence's state: %v", pk)
		}
		if d := pk.m("track_descriptor"); d != nil {
			switch {
			case d.m("process") != nil:
				out.process, out.pid = d.m("process").s("process_name"), d.m("process").u("pid")
				procUUID[d.u("uuid")] = out.pid
			case d.m("thread") != nil:
				th := d.m("thread")
				if pid, ok := procUUID[d.u("parent_uuid")]; !ok || th.u("pid") != pid {
					t.Errorf("thread track %v not under the process", d)
				}
				trackTid[d.u("uuid")] = th.u("tid")
				out.threads[th.u("tid")] = th.s("thread_name")
			case d.m("counter") != nil:
				tid, ok := trackTid[d.u("parent_uuid")]
				if !ok || d.m("counter").u("unit") != 2 {
					t.Errorf("counter track %v", d)
				}
				counterTid[d.u("uuid")] = tid
			}
		}
		if id := pk.m("interned_data"); id != nil {
			for _, en := range id["event_names"] {
				e := en.(pfMsg)
				names[e.u("iid")] = e.s("name")
			}
		}
		ev := pk.m("track_event")
		if ev == nil {
			continue
		}
		if pk.u("sequence_flags") != 2 {
			t.Fatalf("packet %d: an event that does not say it needs the sequence's state", i)
		}
		ts := int64(pk.u("timestamp"))
		name := ""
		if iid := ev.u("name_iid"); iid != 0 {
			var ok bool
			if name, ok = names[iid]; !ok {
				t.Fatalf("packet %d: name %d used before it is interned", i, iid)
			}
		}
		track := ev.u("track_uuid")
		switch ev.u("type") {
		case 1, 2, 3:
			tid, ok := trackTid[track]
			if !ok {
				t.Fatalf("packet %d: event on unknown track %d", i, track)
			}
			st := stacks[tid]
			sl := out.slices[tid]
			switch ev.u("type") {
			case 1:
				sl = append(sl, importedSlice{Name: name, Tid: tid, Ts: ts, Dur: -1, Depth: len(st), Args: map[string]any{}})
				st = append(st, len(sl)-1)
			case 2:
				if len(st) == 0 {
					t.Fatalf("packet %d: end with nothing open", i)
				}
				s := &sl[st[len(st)-1]]
				s.Dur = ts - s.Ts
				for _, a := range ev["debug_annotations"] {
					s.Args[a.(pfMsg).s("name")] = a.(pfMsg).u("bool_value") == 1
				}
				st = st[:len(st)-1]
			case 3:
				sl = append(sl, importedSlice{Name: name, Tid: tid, Ts: ts, Dur: 0, Depth: len(st), Instant: true})
			}
			stacks[tid], out.slices[tid] = st, sl
		case 4:
			tid, ok := counterTid[track]
			if !ok {
				t.Fatalf("packet %d: counter on unknown track %d", i, track)
			}
			out.counters[tid] = append(out.counters[tid], fmt.Sprintf("%d=%d", ts, ev.u("counter_value")))
		default:
			t.Fatalf("packet %d: event type %d", i, ev.u("type"))
		}
	}
	return out
}

// TestPerfettoProto writes a trace full of touching and zero-tick calls, an unwound call, a
// hang and losses as Perfetto protobuf; checks every field against Perfetto's schema; and
// checks that it means what the JSON of the same trace means under Perfetto's JSON rules:
// the same process and thread names, the same slices (name, start, duration; nesting for
// those that last), the same open slices, marks and loss counters.
func TestPerfettoProto(t *testing.T) {
	raw := writeSynth(t, append(synthTrace(5, 20000, 500, "", "worker"), synthEdge()))
	var pb, js bytes.Buffer
	m := Meta{Program: "touching"}
	for _, w := range []struct {
		buf    *bytes.Buffer
		format string
	}{{&pb, "perfetto"}, {&js, "json"}} {
		s, _ := NewSink(w.format, w.buf, m)
		if _, err := Process(bytes.NewReader(raw), Options{MaxDepth: -1}, s); err != nil {
			t.Fatal(err)
		}
	}
	p := pfImport(t, pb.Bytes())
	var f chromeFile
	if err := json.Unmarshal(js.Bytes(), &f); err != nil {
		t.Fatal(err)
	}
	jsl, err := perfettoImport(f)
	if err != nil {
		t.Fatal(err)
	}
	if p.process != "touching" || p.pid != 777 {
		t.Errorf("process %q pid %d", p.process, p.pid)
	}
	jthreads := map[uint64]string{}
	jcounters := map[uint64][]string{}
	for _, e := range f.TraceEvents {
		if e.Ph == "M" && e.Name == "thread_name" {
			jthreads[e.Tid] = e.Args["name"].(string)
		}
		if e.Ph == "C" {
			for _, v := range e.Args {
				jcounters[e.Tid] = append(jcounters[e.Tid], fmt.Sprintf("%d=%v", perfettoTs(e.Ts), v))
			}
		}
	}
	if fmt.Sprint(p.threads) != fmt.Sprint(jthreads) || fmt.Sprint(p.counters) != fmt.Sprint(jcounters) || len(p.counters[2000]) != 1 {
		t.Errorf("threads %v counters %v; JSON: %v %v", p.threads, p.counters, jthreads, jcounters)
	}
	byTid := map[uint64][]importedSlice{}
	for _, s := range jsl {
		byTid[s.Tid] = append(byTid[s.Tid], s)
	}
	key := func(s importedSlice) string {
		d := s.Depth
		if s.Dur == 0 {
			d = -1 // a zero-length call at its parent's end tick: JSON puts it beside the parent
		}
		return fmt.Sprintf("%d %d %d %s", s.Ts, s.Dur, d, s.Name)
	}
	for tid := range jthreads {
		var a, b []string
		for _, s := range byTid[tid] {
			a = append(a, key(s))
		}
		for _, s := range p.slices[tid] {
			b = append(b, key(s))
		}
		sort.Strings(a)
		sort.Strings(b)
		if strings.Join(a, "\n") != strings.Join(b, "\n") {
			t.Errorf("thread %d: protobuf and JSON differ (%d and %d slices)", tid, len(b), len(a))
		}
	}
	// the hang: two slices that did not end; the unwound call says so; the loss is an instant
	var open, unwound, lost int
	for _, s := range p.slices[2000] {
		switch {
		case s.Dur < 0:
			open++
		case s.Args["unwound"] == true:
			unwound++
		case s.Name == "[lost 5]" && s.Instant:
			lost++
		}
	}
	if open != 2 || unwound != 1 || lost != 1 {
		t.Errorf("hang thread: %d open, %d unwound, %d lost marks: %+v", open, unwound, lost, p.slices[2000])
	}
	if pb.Len()*3 > js.Len() {
		t.Errorf("protobuf %d bytes, JSON %d: want it far smaller", pb.Len(), js.Len())
	}
	t.Logf("%d calls: protobuf %d bytes, JSON %d bytes", 20000, pb.Len(), js.Len())
}

// TestPerfettoTwoProcesses: a merged trace of two processes (same tid in both) gets a process
// track each, and each thread track sits under its own process; the JSON names both.
func TestPerfettoTwoProcesses(t *testing.T) {
	var pb, js bytes.Buffer
	for _, w := range []struct {
		buf    *bytes.Buffer
		format string
	}{{&pb, "perfetto"}, {&js, "json"}} {
		s, _ := NewSink(w.format, w.buf, Meta{})
		for _, pid := range []uint64{10, 20} {
			th := &Thread{TID: 5, Main: true}
			s.BeginThread(&Header{PID: pid}, th)
			s.Call(&Call{Name: "-[A b]", StartNanos: 100, DurNanos: 50, SelfNanos: 50, Thread: th})
			s.EndThread()
		}
		if err := s.Close(Totals{}); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := pfDecode(pb.Bytes(), "Trace")
	if err != nil {
		t.Fatal(err)
	}
	procs := map[uint64]uint64{} // uuid -> pid
	threads := 0
	for _, p := range tr["packet"] {
		d := p.(pfMsg).m("track_descriptor")
		switch {
		case d == nil:
		case d.m("process") != nil:
			procs[d.u("uuid")] = d.m("process").u("pid")
		case d.m("thread") != nil:
			threads++
			if procs[d.u("parent_uuid")] != d.m("thread").u("pid") {
				t.Errorf("thread track %v not under its process %v", d, procs)
			}
		}
	}
	if len(procs) != 2 || threads != 2 {
		t.Errorf("%d process tracks, %d thread tracks", len(procs), threads)
	}
	if n := strings.Count(js.String(), `"process_name"`); n != 2 {
		t.Errorf("JSON names %d processes:\n%s", n, js.String())
	}
}
