package main

// A dylib read a second way: its binds and export trie as llvm-objdump prints them, against
// machobind dump's pointer slots and exports, and every import resolved in the SDK stubs
// (crossCheckObjdump).

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/msgtrace/msgtrace/machobind"
)

// bind is one symbol bind llvm-objdump lists.
type bind struct {
	section, dylib, symbol string
	addr                   uint64
}

// objdumpBinds runs llvm-objdump on one slice: --dyld-info for chained fixups, else the bind
// and lazy-bind tables (weak binds name no library and are left out).
func objdumpBinds(path, arch string, chained bool) ([]bind, error) {
	args := []string{"--macho", "--arch=" + arch}
	if chained {
		args = append(args, "--dyld-info")
	} else {
		args = append(args, "--bind", "--lazy-bind", "--weak-bind")
	}
	out, err := exec.Command(*flagObjdump, append(args, path)...).Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v", *flagObjdump, strings.Join(args, " "), err)
	}
	var binds []bind
	table := ""
	for _, line := range strings.Split(string(out), "\n") {
		switch strings.TrimSpace(line) {
		case "Bind table:", "Lazy bind table:", "Weak bind table:", "dyld information:":
			table = strings.TrimSpace(line)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasPrefix(f[2], "0x") {
			continue
		}
		addr, err := strconv.ParseUint(f[2][2:], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("llvm-objdump: bad address in %q", line)
		}
		b := bind{section: f[0] + "," + f[1], addr: addr}
		switch table {
		case "dyld information:": // segment section address pointer type addend dylib symbol
			if len(f) < 8 || f[4] != "bind" {
				continue
			}
			b.dylib, b.symbol = f[6], f[7]
		case "Bind table:": // segment section address type addend dylib symbol
			if len(f) < 7 {
				continue
			}
			b.dylib, b.symbol = f[5], f[6]
		case "Lazy bind table:": // segment section address dylib symbol
			b.dylib, b.symbol = f[3], f[4]
		default:
			continue
		}
		binds = append(binds, b)
	}
	return binds, nil
}

// objdumpExports lists the names in a slice's export trie.
func objdumpExports(path, arch string) (map[string]bool, error) {
	out, err := exec.Command(*flagObjdump, "--macho", "--arch="+arch, "--exports-trie", path).Output()
	if err != nil {
		return nil, fmt.Errorf("%s --exports-trie: %v", *flagObjdump, err)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(f[0], "0x") {
			names[f[1]] = true
		}
	}
	return names, nil
}

// shortName is llvm-objdump's name for a library: its file name up to the first dot.
func shortName(p string) string {
	b := filepath.Base(p)
	if i := strings.IndexByte(b, '.'); i > 0 {
		b = b[:i]
	}
	return b
}

func isPointerSection(sect string) bool {
	for _, s := range []string{",__got", ",__auth_got", ",__la_symbol_ptr", ",__nl_symbol_ptr"} {
		if strings.HasSuffix(sect, s) {
			return true
		}
	}
	return false
}

// crossCheckObjdump reads a dylib slice with llvm-objdump and holds it against machobind dump:
// the msgtrace_* functions in the export trie; every pointer slot machobind lists bound by
// llvm-objdump at the same address to the same symbol and library, and every bind llvm-objdump
// lists in a pointer section listed by machobind; every bind's symbol exported by the SDK stub
// of its library.
func crossCheckObjdump(where, path string, s machobind.SliceDump, exports []string) string {
	trie, err := objdumpExports(path, s.Arch)
	if err != nil {
		fail(where, "%v", err)
		return "objdump FAILED"
	}
	for _, e := range exports {
		if !trie["_"+e] {
			fail(where, "llvm-objdump: _%s is not in the export trie", e)
		}
	}
	chained := s.Fixups == "chained"
	binds, err := objdumpBinds(path, s.Arch, chained)
	if err != nil {
		fail(where, "%v", err)
		return "objdump FAILED"
	}
	byAddr := map[uint64]bind{}
	for _, b := range binds {
		byAddr[b.addr] = b
	}
	slots := map[uint64]bool{}
	for _, p := range s.Pointers {
		if p.Symbol == "" {
			continue
		}
		a, err := strconv.ParseUint(strings.TrimPrefix(p.Address, "0x"), 16, 64)
		if err != nil {
			fail(where, "machobind dump: slot address %q", p.Address)
			continue
		}
		slots[a] = true
		b, ok := byAddr[a]
		switch {
		case !ok:
			fail(where, "machobind lists %s at %s (%s), llvm-objdump binds nothing there", p.Symbol, p.Address, p.Section)
		case b.symbol != p.Symbol:
			fail(where, "%s: machobind says %s, llvm-objdump %s", p.Address, p.Symbol, b.symbol)
		case p.Ordinal > 0 && shortName(p.Library) != b.dylib:
			fail(where, "%s %s: machobind says %s, llvm-objdump %s", p.Address, p.Symbol, p.Library, b.dylib)
		}
	}
	libs := map[string]string{}
	for _, d := range s.Dylibs {
		libs[shortName(d.Path)] = d.Path
	}
	st, err := sdkStubs()
	if err != nil {
		fail(where, "reading the SDK stubs: %v", err)
		return "stubs UNREADABLE"
	}
	var unresolved []string
	inSlots := 0
	for _, b := range binds {
		if isPointerSection(b.section) {
			inSlots++
			if !slots[b.addr] {
				fail(where, "llvm-objdump binds %s at %#x (%s), machobind dump lists no slot there", b.symbol, b.addr, b.section)
			}
		}
		lib, ok := libs[b.dylib]
		if !ok {
			fail(where, "%s is bound to %q, not one of the dylibs it loads", b.symbol, b.dylib)
			continue
		}
		if !st[lib][b.symbol] {
			unresolved = append(unresolved, b.symbol+" ("+b.dylib+")")
		}
	}
	if len(unresolved) > 0 {
		slices.Sort(unresolved)
		fail(where, "imports not in the SDK stubs (dyld would fail to bind them): %s", strings.Join(slices.Compact(unresolved), ", "))
	}
	fixups := "classic binds"
	if chained {
		fixups = "chained fixups"
	}
	return fmt.Sprintf("llvm-objdump: %d msgtrace_* in the export trie; %d binds (%s), all in the SDK stubs, %d of them in pointer sections = machobind's %d slots",
		len(exports), len(binds), fixups, inSlots, len(slots))
}
