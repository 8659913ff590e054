//go:build linux

package msgtrace

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestCLayering: the library's C and assembly are layered one way. Every C and assembly file
// of the module's packages (as `go list` gives cgo's files for this machine) is compiled to an
// object as cgo compiles it (the C compiler `go env CC` names, -O2, the package's directory and
// #cgo CFLAGS), once as built here and once with MT_APPLE_API=1 (method capture's Apple path,
// which a Linux build leaves out); a file depends on another where its object refers to a
// symbol the other's object defines (a call, or data). The test fails where files depend on
// each other in a cycle, naming the files and the symbols, and where a C file's head comment
// ("Depends on:", up to the comment's end) does not name a file it depends on. It logs the
// files in layers, lowest first.
func TestCLayering(t *testing.T) {
	files := cgoFiles(t)
	if len(files) < 10 {
		t.Fatalf("only %d C and assembly files found: %v", len(files), files)
	}
	configs := []struct{ name, flag string }{{"this build", ""}, {"MT_APPLE_API=1", "-DMT_APPLE_API=1"}}
	union := map[[2]string][]string{}
	for _, cfg := range configs {
		g := objectGraph(t, files, cfg.flag)
		for _, cycle := range g.cycles() {
			var b strings.Builder
			for _, a := range cycle {
				for _, d := range cycle {
					if syms := g.edges[[2]string{a, d}]; len(syms) > 0 {
						fmt.Fprintf(&b, "\n\t%s -> %s: %s", a, d, strings.Join(syms, " "))
					}
				}
			}
			t.Errorf("%s: a call cycle between %s:%s", cfg.name, strings.Join(cycle, ", "), b.String())
		}
		for e, syms := range g.edges {
			union[e] = append(union[e], syms...)
		}
		if cfg.flag == "" && !t.Failed() {
			for i, layer := range g.layers() {
				t.Logf("layer %d: %s", i, strings.Join(layer, " "))
			}
		}
	}
	// every file a C file depends on (in either build) is named by its head's "Depends on:"
	for _, f := range files {
		if !strings.HasSuffix(f.path, ".c") {
			continue
		}
		head := headComment(t, f.path)
		i := strings.Index(head, "Depends on:")
		var deps []string
		for e := range union {
			if e[0] == f.path {
				deps = append(deps, e[1])
			}
		}
		slices.Sort(deps)
		if i < 0 {
			if len(deps) > 0 {
				t.Errorf("%s: its head comment has no \"Depends on:\" (it depends on %s)", f.path, strings.Join(deps, ", "))
			}
			continue
		}
		said := strings.Join(strings.Fields(head[i:]), " ")
		for _, d := range deps {
			if !namesFile(said, f.path, d) {
				t.Errorf("%s: its head's \"Depends on:\" does not name %s (%s)", f.path, d, strings.Join(slices.Compact(slices.Sorted(slices.Values(union[[2]string{f.path, d}]))), " "))
			}
		}
	}
}

// A C or assembly file of a package, by its path from the module's root.
type cgoFile struct {
	path   string   // "drain.c", "objc/runtime.c"
	cflags []string // -I the package's directory, its #cgo CFLAGS
}

func cgoFiles(t *testing.T) []cgoFile {
	t.Helper()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var files []cgoFile
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			Dir            string
			CFiles, SFiles []string
			CgoCFLAGS      []string
			CgoCPPFLAGS    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		flags := append(append([]string{"-I" + p.Dir}, p.CgoCPPFLAGS...), p.CgoCFLAGS...)
		for _, n := range append(p.CFiles, p.SFiles...) {
			files = append(files, cgoFile{filepath.ToSlash(filepath.Join(rel, n)), flags})
		}
	}
	return files
}

// The files' dependencies: edges[{a, b}] are the symbols a's object refers to that b's defines.
type fileGraph struct {
	files []string
	edges map[[2]string][]string
}

func objectGraph(t *testing.T, files []cgoFile, extra string) *fileGraph {
	t.Helper()
	cc := "cc"
	if out, err := exec.Command("go", "env", "CC").Output(); err == nil && strings.TrimSpace(string(out)) != "" {
		cc = strings.Fields(string(out))[0]
	}
	dir := t.TempDir()
	type syms struct{ defined, undefined []string }
	all := make([]syms, len(files))
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.NumCPU())
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			obj := filepath.Join(dir, fmt.Sprintf("%d.o", i))
			args := append([]string{"-c", "-O2", "-fPIC", "-w", "-o", obj}, f.cflags...)
			if extra != "" {
				args = append(args, extra)
			}
			if out, err := exec.Command(cc, append(args, f.path)...).CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("%s %s: %v\n%s", cc, f.path, err, out)
				return
			}
			e, err := elf.Open(obj)
			if err != nil {
				errs[i] = err
				return
			}
			defer e.Close()
			st, err := e.Symbols()
			if err != nil {
				errs[i] = fmt.Errorf("%s: %v", f.path, err)
				return
			}
			for _, s := range st {
				bind, typ := elf.ST_BIND(s.Info), elf.ST_TYPE(s.Info)
				switch {
				case s.Name == "" || typ == elf.STT_FILE || typ == elf.STT_SECTION:
				case s.Section == elf.SHN_UNDEF:
					all[i].undefined = append(all[i].undefined, s.Name)
				case bind == elf.STB_GLOBAL || bind == elf.STB_WEAK:
					all[i].defined = append(all[i].defined, s.Name)
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	definer := map[string][]string{}
	g := &fileGraph{edges: map[[2]string][]string{}}
	for i, f := range files {
		g.files = append(g.files, f.path)
		for _, s := range all[i].defined {
			definer[s] = append(definer[s], f.path)
		}
	}
	for i, f := range files {
		for _, s := range all[i].undefined {
			for _, d := range definer[s] {
				if d != f.path {
					g.edges[[2]string{f.path, d}] = append(g.edges[[2]string{f.path, d}], s)
				}
			}
		}
	}
	for _, s := range g.edges {
		slices.Sort(s)
	}
	return g
}

func (g *fileGraph) deps(f string) []string {
	var out []string
	for _, d := range g.files {
		if len(g.edges[[2]string{f, d}]) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// cycles: the strongly connected components of more than one file (Tarjan's algorithm).
func (g *fileGraph) cycles() [][]string {
	index, low := map[string]int{}, map[string]int{}
	on := map[string]bool{}
	var stack []string
	var out [][]string
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		on[v] = true
		for _, w := range g.deps(v) {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var c []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[w] = false
				c = append(c, w)
				if w == v {
					break
				}
			}
			if len(c) > 1 {
				slices.Sort(c)
				out = append(out, c)
			}
		}
	}
	for _, f := range g.files {
		if _, seen := index[f]; !seen {
			visit(f)
		}
	}
	return out
}

// layers: layer 0 depends on no file, layer n on files of layers below n only (the graph has no
// cycle).
func (g *fileGraph) layers() [][]string {
	level := map[string]int{}
	var depth func(f string) int
	depth = func(f string) int {
		if l, ok := level[f]; ok {
			return l
		}
		level[f] = 0
		l := 0
		for _, d := range g.deps(f) {
			l = max(l, depth(d)+1)
		}
		level[f] = l
		return l
	}
	var out [][]string
	for _, f := range g.files {
		l := depth(f)
		for len(out) <= l {
			out = append(out, nil)
		}
		out[l] = append(out[l], f)
	}
	return out
}

// headComment: the file's first /* ... */ comment.
func headComment(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "/*")
	j := strings.Index(s, "*/")
	if i < 0 || j < i {
		return ""
	}
	return s[i : j+2]
}

var archSuffix = regexp.MustCompile(`_(amd64|arm64)\.S$`)

// namesFile: whether text (the head of file from) names path: by its path from the module's
// root, by its base name where both are in one directory, an assembly file also by its name with
// the architecture as a wildcard (msgsend_*.S).
func namesFile(text, from, path string) bool {
	names := []string{path}
	if filepath.Dir(from) == filepath.Dir(path) {
		names = append(names, filepath.Base(path))
	}
	for _, n := range names[:len(names):len(names)] {
		names = append(names, archSuffix.ReplaceAllString(n, "_*.S"))
	}
	for _, n := range names {
		re := regexp.MustCompile(`(^|[^\w/.])` + regexp.QuoteMeta(n) + `($|[^\w])`)
		if re.MatchString(text) {
			return true
		}
	}
	return false
}

// TestCFileSizes: no C or assembly file of the module's packages is over 600 lines unless its
// job is one thing and its head comment says so ("over 600 lines", with why).
func TestCFileSizes(t *testing.T) {
	for _, f := range cgoFiles(t) {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), "\n"); n > 600 && !strings.Contains(strings.Join(strings.Fields(headComment(t, f.path)), " "), "over 600 lines") {
			t.Errorf("%s: %d lines; split it by job, or say in its head why its one job needs over 600 lines", f.path, n)
		}
	}
}
