package sink

import (
	"compress/gzip"
	"io"
	"time"

	"github.com/msgtrace/msgtrace/tracer/engine"
	"github.com/msgtrace/msgtrace/tracer/stream"
)

// profile.proto (github.com/google/pprof, proto/profile.proto), written here directly: the
// pprof package's initialization (its regular expressions for legacy formats) cost every traced
// process ~0.35 ms at start, and its object graph ~10 allocations a stack at the end.

// Field numbers of the messages written.
const (
	ppSampleType        = 1 // Profile.sample_type (ValueType)
	ppSample            = 2 // Profile.sample (Sample)
	ppMapping           = 3
	ppLocation          = 4
	ppFunction          = 5
	ppStringTable       = 6
	ppTimeNanos         = 9
	ppDurationNanos     = 10
	ppPeriodType        = 11
	ppPeriod            = 12
	ppDefaultSampleType = 14

	ppValueTypeType = 1 // ValueType.type, .unit (string indexes)
	ppValueTypeUnit = 2

	ppSampleLocation = 1 // Sample.location_id (packed), .value (packed), .label
	ppSampleValue    = 2
	ppSampleLabel    = 3

	ppLabelKey = 1 // Label.key, .str (string indexes), .num
	ppLabelStr = 2
	ppLabelNum = 3

	ppMappingID       = 1 // Mapping.id, .filename, .has_functions
	ppMappingFilename = 5
	ppMappingHasFuncs = 7

	ppLocationID      = 1 // Location.id, .mapping_id, .line (Line)
	ppLocationMapping = 2
	ppLocationLine    = 4
	ppLineFunction    = 1 // Line.function_id

	ppFunctionID     = 1 // Function.id, .name, .system_name
	ppFunctionName   = 2
	ppFunctionSystem = 3
)

// ppAppendVarint appends a protobuf base-128 varint.
func ppAppendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// ppAppendInt appends a varint field (wire type 0).
func ppAppendInt(b []byte, field int, v uint64) []byte {
	return ppAppendVarint(ppAppendVarint(b, uint64(field)<<3), v)
}

// ppAppendBytes appends a length-delimited field (wire type 2).
func ppAppendBytes(b []byte, field int, v []byte) []byte {
	b = ppAppendVarint(ppAppendVarint(b, uint64(field)<<3|2), uint64(len(v)))
	return append(b, v...)
}

// ppAppendString is ppAppendBytes for a string.
func ppAppendString(b []byte, field int, v string) []byte {
	b = ppAppendVarint(ppAppendVarint(b, uint64(field)<<3|2), uint64(len(v)))
	return append(b, v...)
}

// ppWriter builds one profile: its string table, and the encoded messages that refer to it.
type ppWriter struct {
	out     []byte
	strings map[string]uint64
	table   []string
	msg     []byte // scratch for one message
	sub     []byte // scratch for one message inside it
}

// str returns the index of s in the string table, adding it.
func (p *ppWriter) str(s string) uint64 {
	if i, ok := p.strings[s]; ok {
		return i
	}
	i := uint64(len(p.table))
	p.strings[s] = i
	p.table = append(p.table, s)
	return i
}

func (p *ppWriter) valueType(field int, typ, unit string) {
	p.msg = ppAppendInt(ppAppendInt(p.msg[:0], ppValueTypeType, p.str(typ)), ppValueTypeUnit, p.str(unit))
	p.out = ppAppendBytes(p.out, field, p.msg)
}

// writePprof writes the stacks as a gzipped profile: per (thread, stack) a sample of two
// values, calls and self time (the default), labelled with the thread's name, tid and pid; one
// function and one location per name, in one mapping named after the program.
func writePprof(a *engine.StackTrie, w io.Writer, meta Meta) error {
	p := &ppWriter{strings: map[string]uint64{"": 0}, table: []string{""}}
	tn := meta.TimeNanos
	if tn == 0 {
		tn = time.Now().UnixNano()
	}
	file := meta.Path
	if file == "" {
		file = meta.ProcessName(&stream.Header{})
	}
	p.valueType(ppSampleType, "calls", "count")
	p.valueType(ppSampleType, "self", "nanoseconds")

	thread := make([]int, len(a.Nodes)) // node -> index in a.threads
	for i, th := range a.Threads {
		thread[th.Root] = i
	}
	locs := make([]uint64, len(a.Names)) // name -> location id (0: none yet)
	var nlocs uint64
	var stack []uint64
	kThread, kTid, kPid := p.str("thread"), p.str("tid"), p.str("pid")
	for i := range a.Nodes {
		n := int32(i)
		nd := a.Nodes[n]
		if a.IsRoot(n) {
			continue
		}
		thread[n] = thread[nd.Parent] // parents come before their children
		if nd.Count == 0 && nd.Self == 0 {
			continue
		}
		stack = stack[:0]
		for k := n; !a.IsRoot(k); k = a.Nodes[k].Parent {
			name := a.Nodes[k].Name
			if locs[name] == 0 {
				nlocs++
				locs[name] = nlocs
			}
			stack = append(stack, locs[name]) // leaf first
		}
		th := a.Threads[thread[n]]
		p.sub = p.sub[:0]
		for _, l := range stack {
			p.sub = ppAppendVarint(p.sub, l)
		}
		p.msg = ppAppendBytes(p.msg[:0], ppSampleLocation, p.sub)
		p.sub = ppAppendVarint(ppAppendVarint(p.sub[:0], nd.Count), nd.Self)
		p.msg = ppAppendBytes(p.msg, ppSampleValue, p.sub)
		// labels as the pprof package orders them: string labels, then numeric, each by key
		p.sub = ppAppendInt(ppAppendInt(p.sub[:0], ppLabelKey, kThread), ppLabelStr, p.str(th.Label))
		p.msg = ppAppendBytes(p.msg, ppSampleLabel, p.sub)
		p.sub = ppAppendInt(p.sub[:0], ppLabelKey, kPid)
		if th.PID != 0 {
			p.sub = ppAppendInt(p.sub, ppLabelNum, th.PID)
		}
		p.msg = ppAppendBytes(p.msg, ppSampleLabel, p.sub)
		p.sub = ppAppendInt(p.sub[:0], ppLabelKey, kTid)
		if th.TID != 0 {
			p.sub = ppAppendInt(p.sub, ppLabelNum, th.TID)
		}
		p.msg = ppAppendBytes(p.msg, ppSampleLabel, p.sub)
		p.out = ppAppendBytes(p.out, ppSample, p.msg)
	}
	p.msg = ppAppendInt(p.msg[:0], ppMappingID, 1)
	p.msg = ppAppendInt(p.msg, ppMappingFilename, p.str(file))
	p.msg = ppAppendInt(p.msg, ppMappingHasFuncs, 1)
	p.out = ppAppendBytes(p.out, ppMapping, p.msg)
	// one location and one function per name, both numbered in the order the stacks met them
	byID := make([]int32, nlocs+1)
	for name, id := range locs {
		if id != 0 {
			byID[id] = int32(name)
		}
	}
	for id := uint64(1); id <= nlocs; id++ {
		p.sub = ppAppendInt(p.sub[:0], ppLineFunction, id)
		p.msg = ppAppendInt(p.msg[:0], ppLocationID, id)
		p.msg = ppAppendInt(p.msg, ppLocationMapping, 1)
		p.msg = ppAppendBytes(p.msg, ppLocationLine, p.sub)
		p.out = ppAppendBytes(p.out, ppLocation, p.msg)
	}
	for id := uint64(1); id <= nlocs; id++ {
		name := a.Names[byID[id]]
		d := engine.DisplayName(name)
		s := p.str(d)
		sys := s
		if d != name {
			sys = p.str(name) // a Swift class's runtime name: the system (mangled) name
		}
		p.msg = ppAppendInt(p.msg[:0], ppFunctionID, id)
		p.msg = ppAppendInt(p.msg, ppFunctionName, s)
		p.msg = ppAppendInt(p.msg, ppFunctionSystem, sys)
		p.out = ppAppendBytes(p.out, ppFunction, p.msg)
	}
	if tn != 0 {
		p.out = ppAppendInt(p.out, ppTimeNanos, uint64(tn))
	}
	if d := a.End - a.Start; d != 0 {
		p.out = ppAppendInt(p.out, ppDurationNanos, d)
	}
	p.valueType(ppPeriodType, "self", "nanoseconds")
	p.out = ppAppendInt(p.out, ppPeriod, 1)
	p.out = ppAppendInt(p.out, ppDefaultSampleType, p.str("self"))
	for _, s := range p.table {
		p.out = ppAppendString(p.out, ppStringTable, s)
	}
	zw := gzip.NewWriter(w)
	if _, err := zw.Write(p.out); err != nil {
		return err
	}
	return zw.Close()
}
