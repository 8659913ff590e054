// The Options' filter on calls (include and exclude patterns, least duration, greatest depth),
// applied as calls are entered, its verdicts by name kept per stream and method id.

package engine

// treeFilter applies Options to calls as they are entered.
type treeFilter struct {
	opt      Options
	inc, exc []Pattern
	minNanos float64
	byName   map[*streamFile][]int8 // per stream and method id: 0 unknown, 1 kept, -1 dropped by name
	all      bool                   // no filter: every call kept
}

func newTreeFilter(opt Options) *treeFilter {
	f := &treeFilter{opt: opt, inc: CompilePatterns(opt.Include), exc: CompilePatterns(opt.Exclude),
		minNanos: opt.MinNanos, byName: map[*streamFile][]int8{}}
	f.all = !(opt.MinNanos > 0) && opt.MaxDepth < 0 && len(f.inc) == 0 && len(f.exc) == 0
	return f
}

func (f *treeFilter) keep(sf *streamFile, id uint64, name string, dur uint64, depth int) bool {
	if f.all {
		return true
	}
	if float64(dur) < f.minNanos || (f.opt.MaxDepth >= 0 && depth > f.opt.MaxDepth) {
		return false
	}
	if len(f.inc) == 0 && len(f.exc) == 0 {
		return true
	}
	v := f.byName[sf]
	if id < 1<<20 {
		if id >= uint64(len(v)) {
			v = append(v, make([]int8, int(id)+1-len(v))...)
			f.byName[sf] = v
		}
		if v[id] != 0 {
			return v[id] > 0
		}
	}
	ok := !((len(f.inc) > 0 && !MatchAny(f.inc, name)) || MatchAny(f.exc, name))
	if id < 1<<20 {
		v[id] = -1
		if ok {
			v[id] = 1
		}
	}
	return ok
}
