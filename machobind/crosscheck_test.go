package machobind

import (
	"bufio"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/internal/testfiles"
)

const objdump = "llvm-objdump-19"

// objdumpRun runs llvm-objdump --macho with the given flags on one slice.
func objdumpRun(t *testing.T, file, arch string, fat bool, flags ...string) string {
	t.Helper()
	out, err := objdumpTry(file, arch, fat, flags...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// objdumpTry is objdumpRun returning llvm-objdump's failure instead of failing the test.
func objdumpTry(file, arch string, fat bool, flags ...string) (string, error) {
	args := append([]string{"--macho"}, flags...)
	if fat {
		args = append(args, "--arch="+arch)
	}
	out, err := exec.Command(objdump, append(args, file)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", objdump, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// nmLibraries reads `llvm-nm -m`: undefined symbol -> the library llvm-nm names for it, in
// llvm-objdump's short spelling ("libSystem", "main-executable", "flat-namespace").
func nmLibraries(t *testing.T, file, arch string, fat bool) map[string]string {
	t.Helper()
	args := []string{"-m"}
	if fat {
		args = append(args, "--arch="+arch)
	}
	out, err := exec.Command("llvm-nm-19", append(args, file)...).CombinedOutput()
	if err != nil {
		t.Fatalf("llvm-nm-19 %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	res := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, "(undefined") {
			continue
		}
		f := strings.Fields(line[strings.Index(line, ")")+1:])
		i := slices.Index(f, "external")
		if i < 0 || i+1 >= len(f) {
			continue
		}
		rest := strings.Join(f[i+2:], " ")
		switch {
		case strings.HasPrefix(rest, "(from executable)"):
			res[f[i+1]] = "main-executable"
		case strings.HasPrefix(rest, "(dynamically looked up)"):
			res[f[i+1]] = "flat-namespace"
		case strings.HasPrefix(rest, "(from "):
			res[f[i+1]] = strings.TrimSuffix(strings.TrimPrefix(rest, "(from "), ")")
		}
	}
	return res
}

type objdumpSlot struct {
	addr  uint64
	local bool // LOCAL and/or ABSOLUTE
	name  string
}

// parseIndirect reads `--indirect-symbols` output: section name -> its entries in order.
func parseIndirect(t *testing.T, out string) map[string][]objdumpSlot {
	t.Helper()
	res := map[string][]objdumpSlot{}
	var cur string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "Indirect symbols for (") {
			cur = line[len("Indirect symbols for ("):strings.Index(line, ")")]
			res[cur] = []objdumpSlot{}
			continue
		}
		f := strings.Fields(line)
		if cur == "" || len(f) < 2 || !strings.HasPrefix(f[0], "0x") {
			continue
		}
		addr, err := strconv.ParseUint(f[0][2:], 16, 64)
		if err != nil {
			t.Fatalf("objdump line %q: %v", line, err)
		}
		s := objdumpSlot{addr: addr}
		if f[1] == "LOCAL" || f[1] == "ABSOLUTE" {
			s.local = true
		} else if len(f) >= 3 {
			s.name = f[2]
		}
		res[cur] = append(res[cur], s)
	}
	return res
}

// objdumpBind is what llvm-objdump binds at a slot; linked is, for a classic slot that the
// weak-bind table coalesces, the library of the regular (or lazy) bind there, "" when there is
// none.
type objdumpBind struct{ dylib, symbol, linked string }

// parseBinds reads the bind tables (--bind --lazy-bind --weak-bind for classic dyld info,
// --dyld-info for chained fixups): slot address -> what is bound there. The tables are kept
// apart and combined at the end, as dyld applies them (regular and lazy binds, then the weak
// binds over them): an address in the weak-bind table is "weak" however often either table
// lists it (ld64 repeats entries), linked from the last regular or lazy bind there.
func parseBinds(t *testing.T, out string, chained bool) map[uint64]objdumpBind {
	t.Helper()
	res := map[uint64]objdumpBind{}
	weak := map[uint64]string{} // weak-bind table: address -> symbol
	table := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Bind table:"), strings.HasPrefix(line, "dyld information:"):
			table = "bind"
			continue
		case strings.HasPrefix(line, "Lazy bind table:"):
			table = "lazy"
			continue
		case strings.HasPrefix(line, "Weak bind table:"):
			table = "weak"
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[2], "0x") {
			continue // headers, and the weak table's "strong" (non-weak definition) lines
		}
		addr, err := strconv.ParseUint(f[2][2:], 16, 64)
		if err != nil {
			t.Fatalf("objdump line %q: %v", line, err)
		}
		switch {
		case chained && len(f) >= 8 && f[4] == "bind":
			res[addr] = objdumpBind{dylib: f[6], symbol: f[7]}
		case chained:
			// rebase
		case table == "bind" && len(f) >= 7:
			res[addr] = objdumpBind{dylib: f[5], symbol: f[6]}
		case table == "lazy" && len(f) >= 5:
			res[addr] = objdumpBind{dylib: f[3], symbol: f[4]}
		case table == "weak" && len(f) >= 6:
			weak[addr] = f[5]
		}
	}
	for addr, sym := range weak {
		// weak-definition coalescing: dyld rebinds the slot to the first definition in load
		// order; a regular bind at the same slot is what the static linker found
		b := objdumpBind{dylib: "weak", symbol: sym}
		if prev, ok := res[addr]; ok {
			b.linked = prev.dylib
		}
		res[addr] = b
	}
	return res
}

// objdumpLibraryMatches reports whether llvm-objdump's short dylib name names our library path.
func objdumpLibraryMatches(short, path string) bool {
	switch short {
	case "this-image", "main-executable", "flat-namespace", "weak":
		return short == path
	}
	return strings.HasPrefix(filepath.Base(path), short)
}

// TestCrossCheckObjdump compares every slot of every fixture and corpus file with llvm-objdump:
// the slots per section and their symbols with --indirect-symbols, and the bound library and
// symbol with the bind tables or the chained fixups.
func TestCrossCheckObjdump(t *testing.T) {
	testfiles.NeedTools(t, objdump)
	for _, file := range testfiles.All(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			f, err := Open(file)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			defer f.Close()
			for _, s := range f.Slices {
				t.Run(s.Arch, func(t *testing.T) { crossCheckSlice(t, file, f.Fat, s) })
			}
		})
	}
}

func crossCheckSlice(t *testing.T, file string, fat bool, s *FileSlice) {
	img, err := s.Parse()
	if errors.Is(err, ErrUnsupported) {
		t.Logf("%s [%s]: not read: %v", file, s.Arch, err)
		return
	}
	if err != nil {
		t.Fatalf("%s [%s]: %v", file, s.Arch, err)
	}
	slots, err := img.Slots()
	indirectOut, oerr := objdumpTry(file, s.Arch, fat, "--indirect-symbols")
	switch {
	case oerr != nil && err != nil && strings.Contains(oerr.Error(), "malformed"):
		// both refuse the file: say why, in both words
		t.Logf("%s [%s]: refused by machobind (%v) and by llvm-objdump (%s)", file, s.Arch, err, lastLine(oerr.Error()))
		return
	case oerr != nil:
		t.Fatalf("%s [%s]: llvm-objdump refuses what machobind reads (%d slots): %v", file, s.Arch, len(slots), oerr)
	case err != nil:
		t.Fatalf("%s [%s]: %v", file, s.Arch, err)
	}
	want := parseIndirect(t, indirectOut)
	ours := map[string][]Slot{}
	for _, sl := range slots {
		ours[sl.Section.FullName()] = append(ours[sl.Section.FullName()], sl)
	}
	secs := map[string]*Section{}
	for _, sec := range img.Sections() {
		secs[sec.FullName()] = sec
	}
	for name, entries := range want {
		sec := secs[name]
		if sec == nil {
			t.Errorf("%s [%s]: objdump lists indirect symbols for %s, which we do not see", file, s.Arch, name)
			continue
		}
		if _, _, isSlot := img.slotKind(sec); !isSlot {
			continue // __stubs and the like: not pointer slots
		}
		got := ours[name]
		if len(got) != len(entries) {
			t.Errorf("%s [%s] %s: %d slots, objdump has %d", file, s.Arch, name, len(got), len(entries))
			continue
		}
		for i, e := range entries {
			g := got[i]
			// The indirect-table view of the slot: its flags, and the name it gives when it
			// disagrees with the binds (checked separately below).
			local := g.Local || g.Absolute
			sym := g.Symbol
			if g.IndirectSymbol != "" {
				sym = g.IndirectSymbol
			}
			if local {
				sym = ""
			}
			if g.Addr != e.addr || local != e.local || sym != e.name {
				t.Errorf("%s [%s] %s slot %d: got %#x %q local=%v, objdump %#x %q local=%v",
					file, s.Arch, name, i, g.Addr, sym, local, e.addr, e.name, e.local)
			}
		}
	}
	for name, got := range ours {
		if _, ok := want[name]; !ok && len(got) > 0 {
			t.Errorf("%s [%s]: we list %d slots in %s, objdump lists none", file, s.Arch, len(got), name)
		}
	}

	var binds map[uint64]objdumpBind
	switch img.Fixups.Style {
	case "chained":
		binds = parseBinds(t, objdumpRun(t, file, s.Arch, fat, "--dyld-info"), true)
	case "classic":
		binds = parseBinds(t, objdumpRun(t, file, s.Arch, fat, "--bind", "--lazy-bind", "--weak-bind"), false)
	case "relocations":
		// no bind tables: dyld binds each slot to its symbol from the library the symbol
		// table names, which llvm-nm -m prints
		libs := nmLibraries(t, file, s.Arch, fat)
		binds = map[uint64]objdumpBind{}
		for _, sl := range slots {
			if sl.Symbol != "" {
				binds[sl.Addr] = objdumpBind{dylib: libs[sl.Symbol], symbol: sl.Symbol}
			}
		}
		if img.Fixups.ExternalRelocations > 0 {
			t.Logf("%s [%s]: %d external relocations bind outside the pointer tables", file, s.Arch, img.Fixups.ExternalRelocations)
		}
	default:
		return // object files: nothing is bound yet
	}
	var nmLibs map[string]string
	for _, sl := range slots {
		if sl.Symbol == "" {
			if b, ok := binds[sl.Addr]; ok {
				t.Errorf("%s [%s] %s slot %#x: local, but objdump binds %s from %s", file, s.Arch, sl.Section.FullName(), sl.Addr, b.symbol, b.dylib)
			}
			continue
		}
		b, ok := binds[sl.Addr]
		if !ok {
			t.Errorf("%s [%s] %s slot %#x (%s): objdump has no bind there", file, s.Arch, sl.Section.FullName(), sl.Addr, sl.Symbol)
			continue
		}
		if b.symbol != sl.Symbol || !objdumpLibraryMatches(b.dylib, sl.Library) {
			t.Errorf("%s [%s] %s slot %#x: we bind %s from %s, objdump %s from %s", file, s.Arch, sl.Section.FullName(), sl.Addr, sl.Symbol, sl.Library, b.symbol, b.dylib)
		}
		if b.linked != "" && !objdumpLibraryMatches(b.linked, sl.LinkedLibrary) {
			t.Errorf("%s [%s] %s slot %#x: %s coalesced, linked from %s; objdump's regular bind is from %s", file, s.Arch, sl.Section.FullName(), sl.Addr, sl.Symbol, sl.LinkedLibrary, b.linked)
		}
		if b.dylib == "weak" && b.linked == "" && img.Fixups.Style == "classic" {
			// coalesced by the weak-bind table alone: the symbol table says where the linker
			// found it, llvm-nm -m too (an undefined symbol's library; defined: this image)
			if nmLibs == nil {
				nmLibs = nmLibraries(t, file, s.Arch, fat)
			}
			want, undefined := nmLibs[sl.Symbol]
			if !undefined {
				want = "this-image"
			}
			if !objdumpLibraryMatches(want, sl.LinkedLibrary) {
				t.Errorf("%s [%s] %s slot %#x: %s coalesced, linked from %s; llvm-nm -m says %s", file, s.Arch, sl.Section.FullName(), sl.Addr, sl.Symbol, sl.LinkedLibrary, want)
			}
		}
		if sl.LinkedLibrary == "weak" {
			t.Errorf("%s [%s] %s slot %#x: %s linked from \"weak\": linked_library names where the linker found it", file, s.Arch, sl.Section.FullName(), sl.Addr, sl.Symbol)
		}
		if sl.Ordinal == WeakLookupOrdinal && sl.LinkedLibrary == "" {
			t.Errorf("%s [%s] %s slot %#x: %s coalesced, but no linked library", file, s.Arch, sl.Section.FullName(), sl.Addr, sl.Symbol)
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}
