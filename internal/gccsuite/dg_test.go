package gccsuite

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// What GCC's DejaGnu harness does with its Objective-C run tests, as far as building and
// running them goes (gcc/testsuite/lib/objc-torture.exp, objc-dg.exp and the .exp file of each
// directory, read from the same tarball):
//
//   - objc/execute/*.m: `-w <torture option> -fgnu-runtime`, exceptions/ adds -fobjc-exceptions;
//     linked with -lobjc. Every test is built at each torture option (-O0 … -Os); here at -O2
//     only. No directives (foward-1.x only xfails a Darwin target).
//   - objc.dg/*.m (dg.exp): `-fgnu-runtime`, then the test's dg-options (default none);
//     property/ and strings/ add -Wno-objc-root-class; torture/ and torture/strings/ are built
//     at each of DejaGnu's torture options (here -O2) with -fgnu-runtime -Wno-objc-root-class,
//     torture/tls/ with -fgnu-runtime; special/X.m is linked with special/Xa.m (special.exp
//     compiles that one alone with -Wno-objc-root-class: here one gcc command takes both).
//     Only the tests with `dg-do run` for this target run; dg-warning and the like check the
//     compiler's diagnostics, which this suite does not check (it only needs the program).

// word is one Tcl word of a directive: a string, or a braced list of words.
type word struct {
	s    string
	list []word
	isL  bool
}

func (w word) String() string {
	if !w.isL {
		return w.s
	}
	return "{ " + words(w.list) + " }"
}

// words is ws as written (roughly): words apart, lists braced.
func words(ws []word) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, w.String())
	}
	return strings.Join(parts, " ")
}

// strs returns a word's strings: itself, or the strings of its list.
func (w word) strs() []string {
	if !w.isL {
		return []string{w.s}
	}
	var out []string
	for _, x := range w.list {
		out = append(out, x.s)
	}
	return out
}

// directive is one `{ dg-name args... }` of a test's source.
type directive struct {
	name string
	args []word
}

// parseWords splits Tcl text into words: braces group (nesting), double quotes quote, a
// backslash escapes the next character (kept as written: only the options and names are used).
func parseWords(s string) ([]word, error) {
	var out []word
	i := 0
	for i < len(s) {
		switch c := s[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '{':
			end, err := matchBrace(s, i)
			if err != nil {
				return nil, err
			}
			inner, err := parseWords(s[i+1 : end])
			if err != nil {
				return nil, err
			}
			out = append(out, word{list: inner, isL: true})
			i = end + 1
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated quote in %q", s)
			}
			out = append(out, word{s: s[i+1 : j]})
			i = j + 1
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\r\n{}\"", rune(s[j])) {
				j++
			}
			out = append(out, word{s: s[i:j]})
			i = j
		}
	}
	return out, nil
}

// matchBrace returns the index of the brace closing the one at s[open].
func matchBrace(s string, open int) (int, error) {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // an escaped character
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("unbalanced braces in %q", s[open:])
}

// parseDirectives returns the `{ dg-... }` directives of a source file, in order.
func parseDirectives(src string) ([]directive, error) {
	var out []directive
	for i := 0; ; {
		k := strings.Index(src[i:], "{ dg-")
		if k < 0 {
			return out, nil
		}
		open := i + k
		end, err := matchBrace(src, open)
		if err != nil {
			return nil, err
		}
		ws, err := parseWords(src[open+1 : end])
		if err != nil {
			return nil, err
		}
		out = append(out, directive{name: ws[0].s, args: ws[1:]})
		i = end + 1
	}
}

// target is what a selector is evaluated against: the triplet DejaGnu would call this target
// and the effective-target keywords the suite's run tests ask about.
type target struct {
	triplet  string
	keywords map[string]bool // lp64, ilp32, objc2 (the NeXT runtime's ABI 2), tls_runtime
}

// sel evaluates a target selector: a list of triplet globs (any matches), or an expression of
// operands (globs, effective-target keywords, braced sub-expressions) with !, && and ||,
// evaluated from the left.
func (tg target) sel(ws []word) (bool, error) {
	expr := slices.ContainsFunc(ws, func(w word) bool { return !w.isL && (w.s == "&&" || w.s == "||" || w.s == "!") })
	if !expr {
		for _, w := range ws {
			ok, err := tg.operand(w)
			if err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	}
	i := 0
	var unary func() (bool, error)
	unary = func() (bool, error) {
		if i == len(ws) {
			return false, fmt.Errorf("selector %v ends early", ws)
		}
		w := ws[i]
		i++
		if !w.isL && w.s == "!" {
			v, err := unary()
			return !v, err
		}
		return tg.operand(w)
	}
	val, err := unary()
	for err == nil && i < len(ws) {
		op := ws[i]
		if op.isL || (op.s != "&&" && op.s != "||") {
			return false, fmt.Errorf("bad selector %v", ws)
		}
		i++
		var v bool
		if v, err = unary(); op.s == "&&" {
			val = val && v
		} else {
			val = val || v
		}
	}
	return val, err
}

func (tg target) operand(w word) (bool, error) {
	if w.isL {
		return tg.sel(w.list)
	}
	if v, ok := tg.keywords[w.s]; ok {
		return v, nil
	}
	if !strings.Contains(w.s, "-") {
		return false, fmt.Errorf("unknown effective target %q", w.s)
	}
	return path.Match(w.s, tg.triplet)
}

// targetSel evaluates `{ target SEL }` (the optional last argument of dg-do, dg-options…);
// absent, it holds.
func (tg target) targetSel(args []word, at int) (bool, error) {
	if len(args) <= at {
		return true, nil
	}
	w := args[at]
	if !w.isL || len(w.list) < 2 || w.list[0].s != "target" {
		return false, fmt.Errorf("unsupported selector %v", w)
	}
	return tg.sel(w.list[1:])
}

// flagsMatch is DejaGnu's check_conditional_xfail on the test's flags: some include pattern
// is among them ("*" always is) and no exclude pattern is ("" never is).
func flagsMatch(flags []string, include, exclude []string) bool {
	has := func(p string) bool {
		if p == "*" {
			return true
		}
		for _, f := range flags {
			if ok, _ := path.Match(p, f); ok || p == f {
				return true
			}
		}
		return false
	}
	if !slices.ContainsFunc(include, has) {
		return false
	}
	return !slices.ContainsFunc(exclude, func(p string) bool { return p != "" && has(p) })
}

// gccTest is one test program of the suite.
type gccTest struct {
	name  string   // its path under gcc/testsuite, without .m: execute/IMP is objc/execute/IMP
	srcs  []string // sources, absolute
	flags []string // gcc's options before the sources (-lobjc goes after them)
	skip  string   // why it is not built here
	xfail string   // why it is expected to fail when run here (dg-xfail-run-if)
}

// suiteDirs are the directories of the suite and how GCC's harness builds their tests.
var suiteDirs = []struct {
	dir     string
	flags   string // always given
	dg      bool   // only the tests with dg-do run, with their directives
	special bool   // X.m linked with Xa.m
}{
	{"objc/execute", "-w -O2 -fgnu-runtime", false, false},
	{"objc/execute/exceptions", "-w -O2 -fgnu-runtime -fobjc-exceptions", false, false},
	{"objc.dg", "-fgnu-runtime", true, false},
	{"objc.dg/property", "-fgnu-runtime -Wno-objc-root-class", true, false},
	{"objc.dg/strings", "-fgnu-runtime -Wno-objc-root-class", true, false},
	{"objc.dg/special", "-fgnu-runtime -Wno-objc-root-class", true, true},
	{"objc.dg/torture", "-O2 -fgnu-runtime -Wno-objc-root-class", true, false},
	{"objc.dg/torture/strings", "-O2 -fgnu-runtime -Wno-objc-root-class", true, false},
	{"objc.dg/torture/tls", "-O2 -fgnu-runtime", true, false},
}

// planSuite lists the tests under testsuite (gcc/testsuite) with how each is built for tg,
// or why it is not.
func planSuite(testsuite string, tg target) ([]gccTest, error) {
	var out []gccTest
	for _, d := range suiteDirs {
		srcs, err := filepath.Glob(filepath.Join(testsuite, d.dir, "*.m"))
		if err != nil {
			return nil, err
		}
		if len(srcs) == 0 {
			return nil, fmt.Errorf("no tests in %s", filepath.Join(testsuite, d.dir))
		}
		slices.Sort(srcs)
		for _, src := range srcs {
			name := strings.TrimSuffix(strings.TrimPrefix(src, testsuite+"/"), ".m")
			name = strings.TrimPrefix(name, "objc/")
			gt := gccTest{name: name, srcs: []string{src}, flags: strings.Fields(d.flags)}
			if !d.dg {
				out = append(out, gt)
				continue
			}
			b, err := os.ReadFile(src)
			if err != nil {
				return nil, err
			}
			run, err := gt.applyDirectives(string(b), tg)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", src, err)
			}
			if !run {
				continue // not a run test: compile-only, or diagnostics
			}
			if d.special {
				a := strings.TrimSuffix(src, ".m") + "a.m"
				if _, err := os.Stat(a); err != nil {
					return nil, fmt.Errorf("%s: no %s to link with", src, filepath.Base(a))
				}
				gt.srcs = append(gt.srcs, a)
			}
			out = append(out, gt)
		}
	}
	return out, nil
}

// applyDirectives reads a dg test's directives into gt: it reports whether the test is a run
// test (dg-do run, for some target), and sets gt.skip when it does not run on tg (the last
// dg-do for tg is not run, or the test is skipped or needs what tg has not).
func (gt *gccTest) applyDirectives(src string, tg target) (bool, error) {
	ds, err := parseDirectives(src)
	if err != nil {
		return false, err
	}
	// only a run test's directives matter here (the others name targets and keywords freely)
	if !slices.ContainsFunc(ds, func(d directive) bool {
		return d.name == "dg-do" && len(d.args) > 0 && d.args[0].s == "run"
	}) {
		return false, nil
	}
	var action string // the last dg-do whose target is this one: what DejaGnu does with the test
	var dos []string
	var options, additional []string
	hasOptions := false
	skip := func(why string) {
		if gt.skip == "" {
			gt.skip = why
		}
	}
	for _, d := range ds {
		switch d.name {
		case "dg-do":
			if len(d.args) == 0 {
				return false, fmt.Errorf("dg-do without an action")
			}
			dos = append(dos, words(d.args))
			if ok, err := tg.targetSel(d.args, 1); err != nil {
				return false, err
			} else if ok {
				action = d.args[0].s
			}
		case "dg-options", "dg-additional-options":
			if len(d.args) == 0 {
				return false, fmt.Errorf("%s without options", d.name)
			}
			ok, err := tg.targetSel(d.args, 1)
			if err != nil {
				return false, err
			}
			if !ok {
				continue
			}
			if d.name == "dg-options" {
				options, hasOptions = strings.Fields(d.args[0].s), true
			} else {
				additional = append(additional, strings.Fields(d.args[0].s)...)
			}
		case "dg-additional-sources":
			for _, s := range strings.Fields(d.args[0].s) {
				gt.srcs = append(gt.srcs, filepath.Join(filepath.Dir(gt.srcs[0]), s))
			}
		case "dg-require-effective-target":
			for _, w := range d.args {
				if w.isL { // { target ... } selector on the requirement: none in this suite
					return false, fmt.Errorf("unsupported %s %v", d.name, d.args)
				}
			}
			if ok, err := tg.operand(d.args[0]); err != nil {
				return false, err
			} else if !ok {
				skip("dg-require-effective-target " + d.args[0].s)
			}
		case "dg-skip-if", "dg-xfail-run-if":
			// "comment" { targets } { include options } { exclude options }
			if len(d.args) < 2 || !d.args[1].isL {
				return false, fmt.Errorf("bad %s %v", d.name, d.args)
			}
			ok, err := tg.sel(d.args[1].list)
			if err != nil || !ok {
				if err != nil {
					return false, err
				}
				continue
			}
			include, exclude := []string{"*"}, []string{""}
			if len(d.args) > 2 {
				include = d.args[2].strs()
			}
			if len(d.args) > 3 {
				exclude = d.args[3].strs()
			}
			// the flags as they will be, dg-options included (they come first in the tests)
			flags := append(append(append([]string(nil), gt.flags...), options...), additional...)
			if !flagsMatch(flags, include, exclude) {
				continue
			}
			why := fmt.Sprintf("%s %q %s", d.name, d.args[0].s, words(d.args[1:]))
			if d.name == "dg-skip-if" {
				skip(why)
			} else {
				gt.xfail = why
			}
		}
	}
	if action != "run" {
		gt.skip = "dg-do " + strings.Join(dos, ", dg-do ") + ": not run on this target"
	}
	if hasOptions {
		gt.flags = append(gt.flags, options...)
	}
	gt.flags = append(gt.flags, additional...)
	return true, nil
}

// hostTarget is the target as DejaGnu names this machine, for the 64-bit hosts the suite runs on.
func hostTarget(goarch string) target {
	cpu := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[goarch]
	return target{
		triplet:  cpu + "-pc-linux-gnu",
		keywords: map[string]bool{"lp64": true, "ilp32": false, "objc2": false, "tls_runtime": true},
	}
}

// TestDirectives checks the reading of DejaGnu directives on the forms GCC's Objective-C
// run tests use.
func TestDirectives(t *testing.T) {
	tg := hostTarget("amd64")
	for _, c := range []struct {
		src        string
		run        bool
		skip       bool
		xfail      bool
		flags, add string
	}{
		{src: `/* { dg-do compile } */`},
		{src: `/* { dg-do run } */`, run: true},
		{src: `/* { dg-do run { target *-*-darwin* } } */`, run: true, skip: true},
		{src: `/* { dg-do run { target *-*-darwin[89]* *-*-darwin1[0-7]* } } */`, run: true, skip: true},
		{src: `/* { dg-do run { target *-*-linux* } } */`, run: true},
		{src: "/* { dg-do compile { target *-*-darwin* } } */\n/* { dg-do run { target *-*-darwin1[0-7]* } } */", run: true, skip: true},
		{src: "/* { dg-do compile } */\n/* { dg-do run { target *-*-linux* } } */", run: true},
		{src: "/* { dg-do run } */\n/* { dg-do compile { target *-*-linux* } } */", run: true, skip: true},
		{src: "/* { dg-do run } */\n/* { dg-options \"-std=c99\" } */", run: true, flags: "-std=c99"},
		{src: "/* { dg-do run } */\n/* { dg-options \"-mno-constant-cfstrings\" { target *-*-darwin* } } */", run: true},
		{src: "/* { dg-do run } */\n/* { dg-additional-options \"-Wno-shadow-ivar -fno-local-ivars\" } */", run: true, flags: "-Wno-shadow-ivar -fno-local-ivars"},
		{src: "/* { dg-do run } */\n/* { dg-additional-sources \"../x/y.m\" } */", run: true, add: "/t/x/y.m"},
		{src: "/* { dg-do run } */\n/* { dg-skip-if \"\" { *-*-* } { \"-fnext-runtime\" } { \"\" } } */", run: true},
		{src: "/* { dg-do run } */\n/* { dg-skip-if \"NeXT only\" { *-*-* } { \"-fgnu-runtime\" } { \"\" } } */", run: true, skip: true},
		{src: "/* { dg-do run } */\n/* { dg-skip-if \"ABI 2 only\" { *-*-* && { ! objc2 } } { \"*\" } { \"\" } } */", run: true, skip: true},
		{src: "/* { dg-do run } */\n/* { dg-xfail-run-if \"Needs OBJC2 ABI\" { *-*-darwin* && { lp64 && { ! objc2 } } } { \"-fnext-runtime\" } { \"\" } } */", run: true},
		{src: "/* { dg-do run } */\n/* { dg-xfail-run-if \"x\" { *-*-linux* && lp64 } { \"-fgnu-runtime\" } { \"\" } } */", run: true, xfail: true},
		{src: "/* { dg-do run } */\n/* { dg-require-effective-target ilp32 } */", run: true, skip: true},
		{src: "/* { dg-do run } */\n// { dg-require-effective-target tls_runtime }", run: true},
	} {
		gt := gccTest{srcs: []string{"/t/d/a.m"}, flags: []string{"-fgnu-runtime"}}
		run, err := gt.applyDirectives(c.src, tg)
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		wantFlags := strings.Fields("-fgnu-runtime " + c.flags)
		wantSrcs := append([]string{"/t/d/a.m"}, strings.Fields(c.add)...)
		if run != c.run || (gt.skip != "") != c.skip || (gt.xfail != "") != c.xfail ||
			!slices.Equal(gt.flags, wantFlags) || !slices.Equal(gt.srcs, wantSrcs) {
			t.Errorf("%s:\nrun %v skip %q xfail %q flags %q srcs %q\nwant run %v skip %v xfail %v flags %q srcs %q",
				c.src, run, gt.skip, gt.xfail, gt.flags, gt.srcs, c.run, c.skip, c.xfail, wantFlags, wantSrcs)
		}
	}
	if _, err := tg.sel([]word{{s: "no_such_keyword"}}); err == nil {
		t.Error("an unknown effective-target keyword was accepted")
	}
}
