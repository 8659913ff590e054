package tracer

import (
	"bytes"
	"compress/zlib"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/sink"
	"github.com/msgtrace/msgtrace/tracer/stream"
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
// trace_packet_defaults.proto, clock_snapshot.proto, track_event/{track_event,
// track_descriptor,process_descriptor,thread_descriptor,counter_descriptor,
// debug_annotation}.proto, interned_data/interned_data.proto): message -> field number ->
// name, wire type, message type.
var pfSchema = map[string]map[protowire.Number]pfField{
	"Trace": {1: {"packet", protowire.BytesType, "TracePacket"}},
	"TracePacket": {
		6:  {"clock_snapshot", protowire.BytesType, "ClockSnapshot"},
		8:  {"timestamp", protowire.VarintType, ""},
		10: {"trusted_packet_sequence_id", protowire.VarintType, ""},
		11: {"track_event", protowire.BytesType, "TrackEvent"},
		12: {"interned_data", protowire.BytesType, "InternedData"},
		13: {"sequence_flags", protowire.VarintType, ""},
		50: {"compressed_packets", protowire.BytesType, "bytes"},
		58: {"timestamp_clock_id", protowire.VarintType, ""},
		59: {"trace_packet_defaults", protowire.BytesType, "TracePacketDefaults"},
		60: {"track_descriptor", protowire.BytesType, "TrackDescriptor"},
	},
	"ClockSnapshot": {1: {"clocks", protowire.BytesType, "Clock"}},
	"Clock": {1: {"clock_id", protowire.VarintType, ""}, 2: {"timestamp", protowire.VarintType, ""},
		3: {"is_incremental", protowire.VarintType, ""}, 4: {"unit_multiplier_ns", protowire.VarintType, ""}},
	"TracePacketDefaults": {58: {"timestamp_clock_id", protowire.VarintType, ""},
		11: {"track_event_defaults", protowire.BytesType, "TrackEventDefaults"}},
	"TrackEventDefaults": {11: {"track_uuid", protowire.VarintType, ""}},
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
	"CounterDescriptor": {3: {"unit", protowire.VarintType, ""}, 6: {"unit_name", protowire.BytesType, "string"}},
	"TrackEvent": {
		4:  {"debug_annotations", protowire.BytesType, "DebugAnnotation"},
		9:  {"type", protowire.VarintType, ""},
		10: {"name_iid", protowire.VarintType, ""},
		11: {"track_uuid", protowire.VarintType, ""},
		30: {"counter_value", protowire.VarintType, ""},
		44: {"double_counter_value", protowire.Fixed64Type, ""},
		47: {"flow_ids", protowire.Fixed64Type, ""},
		48: {"terminating_flow_ids", protowire.Fixed64Type, ""},
	},
	"InternedData":    {2: {"event_names", protowire.BytesType, "EventName"}},
	"EventName":       {1: {"iid", protowire.VarintType, ""}, 2: {"name", protowire.BytesType, "string"}},
	"DebugAnnotation": {2: {"bool_value", protowire.VarintType, ""}, 3: {"uint_value", protowire.VarintType, ""}, 6: {"string_value", protowire.BytesType, "string"}, 10: {"name", protowire.BytesType, "string"}},
}

// pfMsg is a decoded message: field name -> values (uint64, string, []byte or pfMsg).
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
func (m pfMsg) f(name string) float64 {
	if v := m[name]; len(v) > 0 {
		return v[0].(float64)
	}
	return 0
}
func (m pfMsg) has(name string) bool { return len(m[name]) > 0 }

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
		case protowire.Fixed64Type: // a double (double_counter_value) or an id (flow_ids)
			v, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return nil, fmt.Errorf("%s.%s: bad fixed64", typ, f.name)
			}
			if f.name == "double_counter_value" {
				out[f.name] = append(out[f.name], math.Float64frombits(v))
			} else {
				out[f.name] = append(out[f.name], v)
			}
			b = b[n:]
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, fmt.Errorf("%s.%s: bad length", typ, f.name)
			}
			b = b[n:]
			switch f.msg {
			case "string":
				out[f.name] = append(out[f.name], string(v))
				continue
			case "bytes":
				out[f.name] = append(out[f.name], v)
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

// pfInflate returns a trace with its compressed_packets expanded in place, as trace_processor's
// tokenizer does (proto_trace_tokenizer.h): each such packet holds nothing else, is under
// 512 KB (trace_packet.proto), and is one zlib stream (inflated with zlib's header
// autodetection: zlib or gzip, not raw deflate) of packets each starting with Trace.packet's
// tag. It also returns how many compressed packets there were.
func pfInflate(t testing.TB, b []byte) ([]byte, int) {
	var out []byte
	compressed := 0
	for len(b) > 0 {
		num, wt, n := protowire.ConsumeTag(b)
		if num != pfTracePacket || wt != protowire.BytesType {
			t.Fatalf("trace: field %d, wire type %d", num, wt)
		}
		p, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			t.Fatal("trace: bad packet length")
		}
		whole := b[:n+m]
		b = b[n+m:]
		num, wt, n = protowire.ConsumeTag(p)
		if num != pfPacketCompressed {
			out = append(out, whole...)
			continue
		}
		compressed++
		z, m := protowire.ConsumeBytes(p[n:])
		if wt != protowire.BytesType || m < 0 || n+m != len(p) {
			t.Fatal("compressed_packets: not alone in its packet")
		}
		if len(whole) >= 512<<10 {
			t.Errorf("compressed packet of %d bytes: Perfetto wants them under 512 KB", len(whole))
		}
		r, err := zlib.NewReader(bytes.NewReader(z))
		if err != nil {
			t.Fatal(err)
		}
		inner, err := io.ReadAll(r) // checks the Adler-32
		if err != nil {
			t.Fatalf("compressed packet %d: %v", compressed, err)
		}
		if len(inner) == 0 || inner[0] != tagPacket {
			t.Fatalf("compressed packet %d does not start with a packet", compressed)
		}
		out = append(out, inner...)
	}
	return out, compressed
}

// pfPacket is a decoded packet with its timestamp resolved to trace time (ns), and the
// defaults of its sequence applied to its track event's track.
type pfPacket struct {
	pfMsg
	ts    int64 // -1 without a timestamp
	track uint64
}

// pfSequences reads the packets of a trace (compressed or not) as trace_processor does
// (proto_trace_reader.cc) with the incremental state of each packet sequence:
// SEQ_INCREMENTAL_STATE_CLEARED starts it; TracePacketDefaults set the sequence's clock and
// track; ClockSnapshot ties a sequence-scoped clock (64-127), here delta-encoded, to BOOTTIME
// (trace time); a timestamp is in the packet's clock, else the sequence's, else trace time; a
// delta-encoded clock adds each timestamp to its last value; InternedData names iids for the
// sequence. It fails on what trace_processor would drop or misread: a packet without a
// sequence, one that needs the sequence's state before it is cleared, a name used before it
// is interned, an unknown clock. Event names are resolved in place (name_iid -> "name").
func pfSequences(t testing.TB, b []byte) []pfPacket {
	inner, _ := pfInflate(t, b)
	tr, err := pfDecode(inner, "Trace")
	if err != nil {
		t.Fatal(err)
	}
	type clock struct {
		last, offset int64 // last value (ns), trace time minus clock time
	}
	type seqState struct {
		valid    bool
		names    map[uint64]string
		defaults pfMsg
		clocks   map[uint64]*clock
	}
	seqs := map[uint64]*seqState{}
	var out []pfPacket
	for i, p := range tr["packet"] {
		pk := p.(pfMsg)
		seq := pk.u("trusted_packet_sequence_id")
		if seq == 0 {
			t.Fatalf("packet %d: no sequence", i)
		}
		st := seqs[seq]
		flags := pk.u("sequence_flags")
		if st == nil {
			if flags&pfSeqCleared == 0 { // not needed by trace_processor, but what this writer does
				t.Fatalf("packet %d: sequence %d does not start by clearing its state", i, seq)
			}
			st = &seqState{}
			seqs[seq] = st
		}
		if flags&pfSeqCleared != 0 {
			*st = seqState{valid: true, names: map[uint64]string{}, clocks: map[uint64]*clock{}}
		}
		if flags&pfSeqNeedsIncrement != 0 && !st.valid {
			t.Fatalf("packet %d: needs sequence %d's state before it is cleared", i, seq)
		}
		if d := pk.m("trace_packet_defaults"); d != nil {
			st.defaults = d
		}
		if id := pk.m("interned_data"); id != nil {
			if !st.valid {
				t.Fatalf("packet %d: interned data before the sequence is cleared", i)
			}
			for _, en := range id["event_names"] {
				e := en.(pfMsg)
				st.names[e.u("iid")] = e.s("name")
			}
		}
		if cs := pk.m("clock_snapshot"); cs != nil {
			// this writer's snapshots: BOOTTIME and one delta-encoded sequence clock in ns
			var boot, seqc pfMsg
			for _, c := range cs["clocks"] {
				switch c := c.(pfMsg); {
				case c.u("clock_id") == pfClockBoottime:
					boot = c
				case c.u("clock_id") >= 64 && c.u("clock_id") < 128:
					seqc = c
				}
			}
			if len(cs["clocks"]) != 2 || boot == nil || seqc == nil || seqc.u("is_incremental") != 1 ||
				boot.has("is_incremental") || seqc.u("unit_multiplier_ns") > 1 || len(pk) != 4 {
				t.Fatalf("packet %d: clock snapshot %v", i, pk)
			}
			st.clocks[seqc.u("clock_id")] = &clock{last: int64(seqc.u("timestamp")),
				offset: int64(boot.u("timestamp")) - int64(seqc.u("timestamp"))}
			continue // trace_processor reads nothing more of such a packet
		}
		out = append(out, pfPacket{pfMsg: pk, ts: -1})
		o := &out[len(out)-1]
		if pk.has("timestamp") {
			clk := pk.u("timestamp_clock_id")
			if clk == 0 && st.defaults != nil {
				clk = st.defaults.u("timestamp_clock_id")
			}
			ts := int64(pk.u("timestamp"))
			switch {
			case clk == 0 || clk == pfClockBoottime:
				o.ts = ts
			case st.clocks[clk] != nil:
				c := st.clocks[clk]
				c.last += ts
				o.ts = c.last + c.offset
			default:
				t.Fatalf("packet %d: timestamp in clock %d, unknown on sequence %d", i, clk, seq)
			}
		}
		if ev := o.m("track_event"); ev != nil {
			o.track = ev.u("track_uuid")
			if o.track == 0 && st.defaults != nil {
				o.track = st.defaults.m("track_event_defaults").u("track_uuid")
			}
			if iid := ev.u("name_iid"); iid != 0 {
				name, ok := st.names[iid]
				if !ok {
					t.Fatalf("packet %d: name %d used before it is interned on sequence %d", i, iid, seq)
				}
				ev["name"] = []any{name}
			}
		}
	}
	return out
}

// pfImport reads a trace as Perfetto's trace processor does for these packets: the packets
// of each sequence with its state (pfSequences), tracks, and per thread track a stack of
// slices (BEGIN pushes, END pops); an instant is a zero-length slice; counters are values on
// their track. trace_processor sorts events by time, keeping file order at equal times; here
// they are taken in file order, and the times on each track must not go back.
type pfTrace struct {
	process  string
	pid      uint64
	threads  map[uint64]string // tid -> name
	slices   map[uint64][]importedSlice
	counters map[uint64][]string // tid -> "ts=value"
	instants []importedSlice     // on the process's track
}

func pfImport(t testing.TB, b []byte) pfTrace {
	out := pfTrace{threads: map[uint64]string{}, slices: map[uint64][]importedSlice{}, counters: map[uint64][]string{}}
	trackTid := map[uint64]uint64{}
	procUUID := map[uint64]uint64{} // process track uuid -> pid
	counterTid := map[uint64]uint64{}
	stacks := map[uint64][]int{}
	lastTs := map[uint64]int64{} // track -> time of its last event
	for i, pk := range pfSequences(t, b) {
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
		ev := pk.m("track_event")
		if ev == nil {
			continue
		}
		if pk.u("sequence_flags") != pfSeqNeedsIncrement {
			t.Fatalf("packet %d: an event that does not say it needs the sequence's state", i)
		}
		ts := pk.ts
		if ts < 0 {
			t.Fatalf("packet %d: an event without a time", i)
		}
		if l, ok := lastTs[pk.track]; ok && ts < l {
			t.Fatalf("packet %d: time goes back on track %d, %d after %d", i, pk.track, ts, l)
		}
		lastTs[pk.track] = ts
		name := ev.s("name")
		switch ev.u("type") {
		case 1, 2, 3:
			tid, ok := trackTid[pk.track]
			if _, proc := procUUID[pk.track]; proc && ev.u("type") == 3 { // a process-wide instant
				out.instants = append(out.instants, importedSlice{Name: name, Ts: ts})
				continue
			}
			if !ok {
				t.Fatalf("packet %d: event on unknown track %d", i, pk.track)
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
				if name != "" {
					t.Fatalf("packet %d: end named %q", i, name)
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
			tid, ok := counterTid[pk.track]
			if !ok {
				t.Fatalf("packet %d: counter on unknown track %d", i, pk.track)
			}
			out.counters[tid] = append(out.counters[tid], fmt.Sprintf("%d=%d", ts, ev.u("counter_value")))
		default:
			t.Fatalf("packet %d: event type %d", i, ev.u("type"))
		}
	}
	return out
}

// pfConvert converts raw to Perfetto protobuf (compressed, as written by default, and
// uncompressed) and to JSON. The compressed trace, inflated, must be the uncompressed one
// byte for byte.
func pfConvert(t testing.TB, raw []byte, m sink.Meta) (pb, unc, js []byte) {
	var bufs [3]bytes.Buffer
	for i := range bufs {
		var s engine.Sink
		switch i {
		case 0:
			s, _ = NewSink("perfetto", &bufs[i], m)
		case 1:
			ps := sink.NewPerfettoSink(&bufs[i], m)
			ps.Uncompressed = true
			s = ps
		case 2:
			s, _ = NewSink("json", &bufs[i], m)
		}
		if _, err := engine.Process(bytes.NewReader(raw), engine.Options{MaxDepth: -1}, s); err != nil {
			t.Fatal(err)
		}
	}
	pb, unc, js = bufs[0].Bytes(), bufs[1].Bytes(), bufs[2].Bytes()
	inner, n := pfInflate(t, pb)
	if n == 0 || !bytes.Equal(inner, unc) {
		t.Fatalf("%d compressed packets: inflated, %d bytes; uncompressed, %d", n, len(inner), len(unc))
	}
	return pb, unc, js
}

// pfSameAsJSON checks that the Perfetto trace p means what the JSON trace js means under
// Perfetto's JSON rules: the same process and thread names, the same slices (name, start,
// duration; nesting for those that last), the same open slices, marks and loss counters.
func pfSameAsJSON(t testing.TB, p pfTrace, js []byte) {
	var f chromeFile
	if err := json.Unmarshal(js, &f); err != nil {
		t.Fatal(err)
	}
	jsl, err := perfettoImport(f)
	if err != nil {
		t.Fatal(err)
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
	if fmt.Sprint(p.threads) != fmt.Sprint(jthreads) || fmt.Sprint(p.counters) != fmt.Sprint(jcounters) {
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
		return fmt.Sprintf("%d %d %d %s %v", s.Ts, s.Dur, d, s.Name, s.Args["unwound"] == true)
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
}

// TestPerfettoProto writes a trace full of touching and zero-tick calls, an unwound call, a
// hang and losses as Perfetto protobuf; checks every field against Perfetto's schema, reads
// it as trace_processor would (sequences, delta-encoded clocks, defaults, interned names,
// compressed packets); and checks that it means what the JSON of the same trace means.
func TestPerfettoProto(t *testing.T) {
	raw := writeSynth(t, append(synthTrace(5, 20000, 500, "", "worker"), synthEdge()))
	pb, unc, js := pfConvert(t, raw, sink.Meta{Program: "touching"})
	for _, b := range [][]byte{pb, unc} {
		p := pfImport(t, b)
		if p.process != "touching" || p.pid != 777 {
			t.Errorf("process %q pid %d", p.process, p.pid)
		}
		pfSameAsJSON(t, p, js)
		if len(p.counters[2000]) != 1 {
			t.Errorf("counters %v", p.counters)
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
	}
	if len(pb)*8 > len(js) {
		t.Errorf("protobuf %d bytes, JSON %d: want it far smaller", len(pb), len(js))
	}
	t.Logf("%d calls: protobuf %d bytes (uncompressed %d), JSON %d bytes", 20000, len(pb), len(unc), len(js))
}

// TestPerfettoBytesPerCall: on a realistic trace (pfGenerate: 60,000 calls on 4 threads,
// 2,000 methods, trees up to 40 deep, most calls a few ticks of a 24 MHz clock, many of none,
// siblings touching), read as a stream, the Perfetto trace takes at most 16 bytes a call,
// and means what the JSON means.
func TestPerfettoBytesPerCall(t *testing.T) {
	g := pfGenerate(11, 60000, 2000, 4)
	pb, unc, js := pfConvert(t, g.stream(), sink.Meta{})
	p := pfImport(t, pb)
	pfSameAsJSON(t, p, js)
	calls := 0
	for _, sl := range p.slices {
		calls += len(sl)
	}
	if calls != 60000 {
		t.Fatalf("%d calls", calls)
	}
	per := float64(len(pb)) / float64(calls)
	if per > 16 {
		t.Errorf("%.2f bytes a call, want at most 16", per)
	}
	t.Logf("%d calls: %.2f bytes a call (uncompressed %.2f, JSON %.2f)", calls, per,
		float64(len(unc))/float64(calls), float64(len(js))/float64(calls))
}

// TestPerfettoTwoProcesses: a merged trace of two processes (same tid in both) gets a process
// track each, and each thread track sits under its own process; the JSON names both.
func TestPerfettoTwoProcesses(t *testing.T) {
	var pb, js bytes.Buffer
	for _, w := range []struct {
		buf    *bytes.Buffer
		format string
	}{{&pb, "perfetto"}, {&js, "json"}} {
		s, _ := NewSink(w.format, w.buf, sink.Meta{})
		for _, pid := range []uint64{10, 20} {
			th := &stream.Thread{TID: 5, Main: true}
			s.BeginThread(&stream.Header{PID: pid}, th)
			s.Call(&engine.Call{Name: "-[A b]", StartNanos: 100 * pid, DurNanos: 50, SelfNanos: 50, Thread: th})
			s.EndThread()
		}
		if err := s.Close(engine.Totals{}); err != nil {
			t.Fatal(err)
		}
	}
	procs := map[uint64]uint64{} // uuid -> pid
	threads := map[uint64]uint64{}
	var got []string
	for _, p := range pfSequences(t, pb.Bytes()) {
		if ev := p.m("track_event"); ev != nil {
			got = append(got, fmt.Sprintf("%d@%d:%d", threads[p.track], p.ts, ev.u("type")))
		}
		d := p.m("track_descriptor")
		switch {
		case d == nil:
		case d.m("process") != nil:
			procs[d.u("uuid")] = d.m("process").u("pid")
		case d.m("thread") != nil:
			threads[d.u("uuid")] = d.m("thread").u("pid")
			if procs[d.u("parent_uuid")] != d.m("thread").u("pid") {
				t.Errorf("thread track %v not under its process %v", d, procs)
			}
		}
	}
	if len(procs) != 2 || len(threads) != 2 {
		t.Errorf("%d process tracks, %d thread tracks", len(procs), len(threads))
	}
	if fmt.Sprint(got) != "[10@1000:1 10@1050:2 20@2000:1 20@2050:2]" {
		t.Errorf("events (pid@ns:type) %v", got)
	}
	if n := strings.Count(js.String(), `"process_name"`); n != 2 {
		t.Errorf("JSON names %d processes:\n%s", n, js.String())
	}
}

// TestPerfettoTimeBack: a time before the previous one on the sequence (pre-order never makes
// one, a broken recording might) is written absolute, in trace time, and the delta-encoded
// clock goes on from where it was.
func TestPerfettoTimeBack(t *testing.T) {
	var pb bytes.Buffer
	s := sink.NewPerfettoSink(&pb, sink.Meta{})
	ts := s.Needs().Tree
	th := &stream.Thread{TID: 1}
	ts.BeginThread(&stream.Header{PID: 1}, th)
	for _, c := range []*engine.Call{
		{Name: "a", StartNanos: 1000, DurNanos: 500}, {Name: "b", StartNanos: 900, DurNanos: 2000},
		{Name: "c", StartNanos: 1600, DurNanos: 0}, {Name: "d", StartNanos: 1600, DurNanos: 1, Flags: stream.FlagUnwound},
	} {
		ts.Enter(c, 0)
		ts.Exit(c, 0)
	}
	ts.Mark(&stream.Mark{Kind: stream.MarkLost, StartNanos: 1700, Count: 3}, 0)
	ts.EndThread()
	if err := ts.Close(engine.Totals{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pfSequences(t, pb.Bytes()) {
		if ev := p.m("track_event"); ev != nil {
			got = append(got, fmt.Sprintf("%s%d@%d", ev.s("name"), ev.u("type"), p.ts))
		}
	}
	if want := "[a1@1000 2@1500 b1@900 2@2900 c1@1600 2@1600 d1@1600 2@1601 [lost 3]3@1700 4@1700]"; fmt.Sprint(got) != want {
		t.Errorf("events %v\nwant   %s", got, want)
	}
}
