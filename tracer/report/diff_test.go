package report

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// bruteMannWhitney enumerates every split of the pooled values.
func bruteMannWhitney(a, b []uint64) float64 {
	pool := append(append([]uint64{}, a...), b...)
	n, n1 := len(pool), len(a)
	rank := make([]float64, n) // midranks
	for i, v := range pool {
		less, eq := 0, 0
		for _, w := range pool {
			if w < v {
				less++
			} else if w == v {
				eq++
			}
		}
		rank[i] = float64(less) + float64(eq+1)/2
	}
	obs := 0.0
	for i := 0; i < n1; i++ {
		obs += rank[i]
	}
	mean := float64(n1*(n+1)) / 2
	dev := math.Abs(obs - mean)
	var tail, all float64
	for mask := 0; mask < 1<<n; mask++ {
		if popcount(mask) != n1 {
			continue
		}
		s := 0.0
		for i := 0; i < n; i++ {
			if mask>>i&1 == 1 {
				s += rank[i]
			}
		}
		all++
		if math.Abs(s-mean) >= dev-1e-9 {
			tail++
		}
	}
	return tail / all
}

func popcount(x int) int {
	c := 0
	for ; x > 0; x &= x - 1 {
		c++
	}
	return c
}

func TestMannWhitney(t *testing.T) {
	near := func(got, want, tol float64) bool { return math.Abs(got-want) <= tol }
	if p := MannWhitneyP([]uint64{1, 2, 3, 4, 5}, []uint64{6, 7, 8, 9, 10}); !near(p, 2.0/252, 1e-12) {
		t.Errorf("separated 5 vs 5: p %g, want 2/252", p)
	}
	if p := MannWhitneyP([]uint64{1, 2, 3, 5, 6}, []uint64{4, 7, 8, 9, 10}); !near(p, 8.0/252, 1e-12) {
		t.Errorf("U=2, 5 vs 5: p %g, want 8/252", p)
	}
	// R: wilcox.test(x, y, alternative = "g"): W = 35, p-value = 0.1272 (two-sided twice that)
	x := []uint64{80, 83, 189, 104, 145, 138, 191, 164, 73, 146}
	y := []uint64{115, 88, 90, 74, 121}
	if p := MannWhitneyP(x, y); !near(p, 0.2544, 5e-4) {
		t.Errorf("R's example: p %g, want 0.2544", p)
	}
	if p := MannWhitneyP([]uint64{3, 3, 3}, []uint64{3, 3}); p != 1 {
		t.Errorf("all equal: p %g", p)
	}
	if p := MinMannWhitneyP(5, 5); !near(p, 2.0/252, 1e-12) || MinMannWhitneyP(2, 2) != 1.0/3 || MinMannWhitneyP(0, 4) != 1 {
		t.Errorf("min p %g %g", p, MinMannWhitneyP(2, 2))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		a := make([]uint64, 1+rng.IntN(6))
		b := make([]uint64, 1+rng.IntN(6))
		for j := range a {
			a[j] = uint64(rng.IntN(5))
		}
		for j := range b {
			b[j] = uint64(rng.IntN(5) + rng.IntN(2))
		}
		if got, want := MannWhitneyP(a, b), bruteMannWhitney(a, b); !near(got, want, 1e-9) {
			t.Fatalf("%v vs %v: p %g, enumeration %g", a, b, got, want)
		}
	}
	// the normal approximation is close to the exact p where both apply
	for i := 0; i < 50; i++ {
		a, b := make([]uint64, 20), make([]uint64, 20)
		for j := range a {
			a[j] = uint64(rng.IntN(100))
			b[j] = uint64(rng.IntN(100) + rng.IntN(40))
		}
		if e, n := mannWhitney(a, b, true), mannWhitney(a, b, false); !near(e, n, 0.01) {
			t.Errorf("exact %g, normal %g", e, n)
		}
	}
}

func profileOf(methods ...MethodStat) *RunProfile {
	p := &RunProfile{Methods: map[string]MethodStat{}, Edges: map[[2]string]struct{}{}}
	for _, m := range methods {
		p.Methods[m.Method] = m
	}
	return p
}

// TestDiff: thresholds and the rank test on synthetic runs.
func TestDiff(t *testing.T) {
	const ms = 1e6
	var base, head []*RunProfile
	for i := uint64(0); i < 5; i++ {
		jit := i * 50_000 // 0.05 ms steps
		b := profileOf(
			MethodStat{"-[A slow]", 10, 10*ms + jit, 10*ms + jit, false, ""},            // +50 %: a regression
			MethodStat{"-[A tiny]", 1000, 2000 + 1000*i, 2000 + 1000*i, false, ""},      // +40 % of 2 us: under the floor
			MethodStat{"-[A noisy]", 10, 20*ms + 3*jit*10, 20*ms + 3*jit*10, false, ""}, // overlapping runs: noise
			MethodStat{"-[A caller]", 1, 1 * ms, 31*ms + jit, false, ""},                // total grows through -[A slow]
			MethodStat{"-[A chatty]", 100 + i, 5*ms + jit, 5*ms + jit, false, ""},       // calls 100 -> 400
			MethodStat{"-[A faster]", 10, 8*ms + jit, 8*ms + jit, false, ""},            // -50 %
			MethodStat{"-[A gone]", 1, 2*ms + jit, 2*ms + jit, false, ""},               // vanished
		)
		noisy := 20*ms + 3*(4-i)*jit*10/max(i, 1)
		h := profileOf(
			MethodStat{"-[A slow]", 10, 15*ms + jit, 15*ms + jit, false, ""},
			MethodStat{"-[A tiny]", 1000, 2800 + 1000*i, 2800 + 1000*i, false, ""},
			MethodStat{"-[A noisy]", 10, noisy, noisy, false, ""},
			MethodStat{"-[A caller]", 1, 1 * ms, 36*ms + jit, false, ""},
			MethodStat{"-[A chatty]", 400 + i, 5*ms + jit, 5*ms + jit, false, ""},
			MethodStat{"-[A faster]", 10, 4*ms + jit, 4*ms + jit, false, ""},
			MethodStat{"-[A added]", 3, 4*ms + jit, 4*ms + jit, false, ""}, // new, 4 ms per run
			MethodStat{"-[A small]", 3, 1000, 1000, false, ""},             // new, 1 us
		)
		h.Edges[[2]string{"-[A caller]", "-[A middle]"}] = struct{}{}
		h.Edges[[2]string{"-[A middle]", "-[A slow]"}] = struct{}{}
		base, head = append(base, b), append(head, h)
	}
	d := Diff(base, head, DefaultDiffOptions())
	key := func(es []DiffEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Metric+" "+e.Method)
		}
		return out
	}
	if got, want := key(d.Regressions), []string{"self -[A slow]", "calls -[A chatty]"}; !reflect.DeepEqual(got, want) {
		t.Errorf("regressions %q, want %q", got, want)
	}
	if got, want := key(d.Improvements), []string{"self -[A faster]"}; !reflect.DeepEqual(got, want) {
		t.Errorf("improvements %q, want %q", got, want)
	}
	if got := key(d.ThroughCallees); !reflect.DeepEqual(got, []string{"total -[A caller]"}) || !reflect.DeepEqual(d.ThroughCallees[0].Via, []string{"-[A slow]"}) {
		t.Errorf("through callees %q %+v", got, d.ThroughCallees)
	}
	if len(d.New) != 2 || d.New[0].Method != "-[A added]" || !d.New[0].Regression || d.New[1].Regression {
		t.Errorf("new %+v", d.New)
	}
	if len(d.Vanished) != 1 || d.Vanished[0].Method != "-[A gone]" || !d.Regressed() || !d.Testable {
		t.Errorf("vanished %+v", d.Vanished)
	}
	if r := d.Regressions[0]; r.Base != 10.1*ms || r.Head != 15.1*ms || *r.ChangePct < 49 || *r.ChangePct > 50 || r.P > 0.01 {
		t.Errorf("-[A slow]: %+v", r)
	}
	// the same runs on both sides: nothing
	if d := Diff(base, base, DefaultDiffOptions()); d.Regressed() || len(d.Improvements)+len(d.ThroughCallees)+len(d.New)+len(d.Vanished) != 0 {
		t.Errorf("base against itself: %+v", d)
	}
	// one run a side: the test cannot decide, thresholds do
	d = Diff(base[:1], head[:1], DefaultDiffOptions())
	if d.Testable || !reflect.DeepEqual(key(d.Regressions), []string{"self -[A slow]", "calls -[A chatty]"}) {
		t.Errorf("one run a side: testable %v, %q", d.Testable, key(d.Regressions))
	}
	// a higher floor: -[A slow]'s 5 ms is not enough
	d = Diff(base, head, DiffOptions{ThresholdPct: 10, MinSelfNanos: 6 * ms, MinCalls: 1000, Alpha: 0.05})
	if len(d.Regressions) != 0 || d.Regressed() {
		t.Errorf("6 ms floor: %q, new %+v", key(d.Regressions), d.New)
	}
}
