package simdyld

import (
	"bufio"
	"encoding/binary"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/msgtrace/msgtrace/internal/testfiles"
)

// objdumpFixups lists what llvm-objdump says is bound (address -> symbol) and rebased
// (address -> target) in a thin file.
func objdumpFixups(t *testing.T, file string, chained bool) (binds map[uint64]string, rebases map[uint64]uint64) {
	args := []string{"--macho", "--bind", "--lazy-bind", "--rebase"}
	if chained {
		args = []string{"--macho", "--dyld-info"}
	}
	out, err := exec.Command("llvm-objdump-19", append(args, file)...).CombinedOutput()
	if err != nil {
		t.Fatalf("llvm-objdump: %v\n%s", err, out)
	}
	binds, rebases = map[uint64]string{}, map[uint64]uint64{}
	table := ""
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Bind table:"), strings.HasPrefix(line, "dyld information:"):
			table = "bind"
		case strings.HasPrefix(line, "Lazy bind table:"):
			table = "lazy"
		case strings.HasPrefix(line, "Rebase table:"):
			table = "rebase"
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[2], "0x") {
			continue
		}
		addr, _ := strconv.ParseUint(f[2][2:], 16, 64)
		switch {
		case chained && len(f) >= 8 && f[4] == "bind":
			binds[addr] = f[7]
		case chained && len(f) >= 6 && f[4] == "rebase":
			v, _ := strconv.ParseUint(strings.TrimPrefix(f[5], "0x"), 16, 64)
			rebases[addr] = v
		case table == "bind" && len(f) >= 7:
			binds[addr] = f[6]
		case table == "lazy" && len(f) >= 5:
			binds[addr] = f[4]
		case table == "rebase" && len(f) >= 4:
			rebases[addr] = 0 // classic listing gives no target: checked as "value moved by slide"
		}
	}
	return binds, rebases
}

// TestLoadMatchesObjdump loads every thin fixture and checks the mapping against llvm-objdump:
// every bind at its slid address with the fake value, every chained rebase pointing at its
// target plus the slide, and the segments' protections as dyld leaves them.
func TestLoadMatchesObjdump(t *testing.T) {
	n := 0
	for _, file := range testfiles.Fixtures(t) {
		base := filepath.Base(file)
		if strings.Contains(base, "universal") || strings.HasSuffix(base, ".o") || strings.Contains(base, "dsym") {
			continue
		}
		n++
		t.Run(base, func(t *testing.T) {
			for _, lazy := range []bool{false, true} {
				img, err := Load(file, Options{BindLazy: lazy})
				if err != nil {
					t.Fatal(err)
				}
				defer img.Close()
				if img.Slide == 0 {
					t.Fatal("zero slide")
				}
				chained := strings.Contains(base, "chained")
				binds, rebases := objdumpFixups(t, file, chained)
				got := map[uint64]Bind{}
				for _, b := range img.Binds {
					if _, dup := got[b.Addr]; !dup || !b.Weak {
						got[b.Addr] = b
					}
				}
				for addr, sym := range binds {
					b, ok := got[addr+uint64(img.Slide)]
					if !ok || b.Symbol != sym {
						t.Fatalf("bind %s at %#x: simulated dyld has %+v", sym, addr, b)
					}
					if b.Lazy && !lazy {
						continue
					}
					if v := img.word(addr); v != b.Value {
						t.Fatalf("bind %s at %#x holds %#x, want %#x", sym, addr, v, b.Value)
					}
				}
				if len(binds) == 0 && !strings.HasPrefix(base, "go-") {
					t.Fatal("objdump lists no binds")
				}
				for addr, target := range rebases {
					if chained && img.word(addr) != target+uint64(img.Slide) {
						t.Fatalf("rebase at %#x holds %#x, want %#x + slide", addr, img.word(addr), target)
					}
				}
				prots, err := img.CurrentProtections()
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range prots {
					want := map[string]int{"__TEXT": syscall.PROT_READ | syscall.PROT_EXEC, "__DATA_CONST": syscall.PROT_READ,
						"__DATA": syscall.PROT_READ | syscall.PROT_WRITE, "__LINKEDIT": syscall.PROT_READ}[s.Name]
					if want != 0 && s.Prot != want {
						t.Fatalf("%s mapped %d, want %d", s.Name, s.Prot, want)
					}
				}
			}
		})
	}
	if n == 0 {
		t.Fatal("no thin fixtures")
	}
}

// word reads the pointer at an unslid address.
func (img *Image) word(vmaddr uint64) uint64 {
	b, err := img.at(vmaddr)
	if err != nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}
