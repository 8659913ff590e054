package report

import (
	"math"
	"sort"
)

// The Mann-Whitney U test (Wilcoxon rank-sum): are the values of one sample larger than the
// other's more often than chance allows? It uses only the order of the values, so it assumes
// no distribution (run times are skewed: a run is slowed, rarely sped up) and one outlier run
// moves it by one rank, not by its size.
//
// Up to exactMaxN values in all, the two-sided p-value is exact: the share of the ways to split
// the pooled ranks (midranks for ties) into two groups of the samples' sizes whose rank sum is
// at least as far from its mean as the observed one. Past that, the normal approximation with
// the tie correction and a continuity correction.

const exactMaxN = 40

// MannWhitneyP returns the two-sided p-value of the Mann-Whitney U test of a against b; 1 when
// either is empty or every value is equal.
func MannWhitneyP(a, b []uint64) float64 {
	return mannWhitney(a, b, len(a)+len(b) <= exactMaxN)
}

func mannWhitney(a, b []uint64, exact bool) float64 {
	n1, n2 := len(a), len(b)
	n := n1 + n2
	if n1 == 0 || n2 == 0 {
		return 1
	}
	type obs struct {
		v     uint64
		first bool
	}
	all := make([]obs, 0, n)
	for _, v := range a {
		all = append(all, obs{v, true})
	}
	for _, v := range b {
		all = append(all, obs{v, false})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v })
	// doubled midranks, integers: a tie group over positions i..j-1 (ranks i+1..j) has midrank (i+1+j)/2
	ranks := make([]int, n)
	var tieTerm float64 // sum of t^3 - t over tie groups
	for i := 0; i < n; {
		j := i
		for j < n && all[j].v == all[i].v {
			j++
		}
		for k := i; k < j; k++ {
			ranks[k] = i + 1 + j
		}
		t := float64(j - i)
		tieTerm += t*t*t - t
		i = j
	}
	if tieTerm == float64(n*n*n-n) { // all equal
		return 1
	}
	r1 := 0 // doubled rank sum of a
	for i, o := range all {
		if o.first {
			r1 += ranks[i]
		}
	}
	mean2 := n1 * (n + 1) // doubled mean rank sum of a
	dev := r1 - mean2
	if dev < 0 {
		dev = -dev
	}
	if exact {
		// ways[k][s]: subsets of k of the ranks seen so far with doubled rank sum s
		maxS := n * (n + 1)
		ways := make([][]float64, n1+1)
		for k := range ways {
			ways[k] = make([]float64, maxS+1)
		}
		ways[0][0] = 1
		for i, r := range ranks {
			for k := min(i+1, n1); k >= 1; k-- {
				src, dst := ways[k-1], ways[k]
				for s := maxS - r; s >= 0; s-- {
					if src[s] != 0 {
						dst[s+r] += src[s]
					}
				}
			}
		}
		var tail, all float64
		for s, w := range ways[n1] {
			all += w
			if d := s - mean2; d >= dev || -d >= dev {
				tail += w
			}
		}
		return min(1, tail/all)
	}
	// normal approximation: U1 = R1 - n1(n1+1)/2, mean n1 n2 / 2
	f1, f2, fn := float64(n1), float64(n2), float64(n)
	sigma := math.Sqrt(f1 * f2 / 12 * ((fn + 1) - tieTerm/(fn*(fn-1))))
	z := (float64(dev)/2 - 0.5) / sigma
	if z <= 0 {
		return 1
	}
	return math.Erfc(z / math.Sqrt2)
}

// MinMannWhitneyP is the smallest two-sided p-value the test can give for samples of n1 and n2
// values: 2 / C(n1+n2, n1), when one sample is entirely above the other.
func MinMannWhitneyP(n1, n2 int) float64 {
	if n1 == 0 || n2 == 0 {
		return 1
	}
	c := 1.0
	for i := 1; i <= n1; i++ {
		c = c * float64(n2+i) / float64(i)
	}
	return min(1, 2/c)
}

// HolmAdjust returns Holm's step-down adjusted p-values: the family-wise error rate stays at
// most alpha when those at most alpha are rejected.
func HolmAdjust(ps []float64) []float64 {
	m := len(ps)
	idx := make([]int, m)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return ps[idx[a]] < ps[idx[b]] })
	out := make([]float64, m)
	run := 0.0
	for j, k := range idx {
		run = max(run, min(1, float64(m-j)*ps[k]))
		out[k] = run
	}
	return out
}
