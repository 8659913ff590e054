//go:build linux

package machobind

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/msgtrace/msgtrace/internal/simdyld"
	"github.com/msgtrace/msgtrace/internal/testfiles"
)

// benchImages picks the smallest fixture with imports and the largest file of the corpus (or
// of the fixtures when there is no corpus).
func benchImages(b *testing.B) []string {
	fx := testfiles.Fixtures(b)
	small := fixture(b, "objc-macos-arm64-exe-chained")
	all := append(fx, testfiles.Corpus(b)...)
	sort.Slice(all, func(i, j int) bool { return size(all[i]) < size(all[j]) })
	var largest string
	for i := len(all) - 1; i >= 0; i-- {
		if f, err := Open(all[i]); err == nil && !f.Fat {
			f.Close()
			largest = all[i]
			break
		}
	}
	return []string{small, largest}
}

func size(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

// BenchmarkRebind measures RebindImage + Undo on a mapped image with 1, 10 and 100 rebindings
// at once. ns/slot is per slot walked (every pointer slot of the image is looked at once,
// whatever the number of rebindings); changed is the number of slots written and restored.
func BenchmarkRebind(b *testing.B) {
	for _, file := range benchImages(b) {
		img, err := simdyld.Load(file, simdyld.Options{})
		if err != nil {
			b.Fatal(err)
		}
		l := loadedOf(img)
		parsed, err := ParseLoaded(l)
		if err != nil {
			b.Fatal(err)
		}
		slots, _ := parsed.Slots()
		var names []string
		seen := map[string]bool{}
		for _, s := range slots {
			if s.Symbol != "" && !seen[s.Symbol] {
				seen[s.Symbol] = true
				names = append(names, s.Symbol)
			}
		}
		for _, n := range []int{1, 10, 100} {
			var rs []Rebinding
			for i := 0; i < n; i++ {
				name := fmt.Sprintf("_absent_%d", i) // pad with names the image does not import
				if i < len(names) {
					name = names[i]
				}
				rs = append(rs, Rebinding{Name: name, Replacement: uintptr(0x5150_0000_0000 + i*16)})
			}
			b.Run(fmt.Sprintf("%s/slots=%d/rebindings=%d", filepath.Base(file), len(slots), n), func(b *testing.B) {
				r := NewRebinder(&simRuntime{})
				changed := 0
				for b.Loop() {
					h, err := r.RebindImage(l, rs...)
					if err != nil {
						b.Fatal(err)
					}
					changed = h.Slots()
					if err := h.Undo(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(slots)), "ns/slot")
				b.ReportMetric(float64(changed), "changed")
			})
		}
		img.Close()
	}
}

// BenchmarkMatch measures only the walk and the name matching (no page-protection calls): the
// part whose cost must not grow with the number of rebindings.
func BenchmarkMatch(b *testing.B) {
	for _, file := range benchImages(b) {
		img, err := simdyld.Load(file, simdyld.Options{})
		if err != nil {
			b.Fatal(err)
		}
		parsed, err := ParseLoaded(loadedOf(img))
		if err != nil {
			b.Fatal(err)
		}
		slots, _ := parsed.Slots()
		for _, n := range []int{1, 10, 100} {
			var names []string
			for i := 0; i < n; i++ {
				names = append(names, fmt.Sprintf("_absent_%d", i))
			}
			if len(slots) > 0 {
				names[0] = slots[len(slots)-1].Symbol
			}
			set := NewNameSet(names...)
			b.Run(fmt.Sprintf("%s/slots=%d/rebindings=%d", filepath.Base(file), len(slots), n), func(b *testing.B) {
				for b.Loop() {
					matched := 0
					err := parsed.WalkSlots(func(s *Slot, name, _ []byte) bool {
						if _, ok := set.Lookup(name); ok {
							matched++
						}
						return true
					})
					if err != nil || matched == 0 {
						b.Fatal(err, matched)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(slots)), "ns/slot")
			})
		}
		img.Close()
	}
}
