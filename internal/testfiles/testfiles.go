// Package testfiles finds the Mach-O inputs that tests run over: the fixtures that
// `make fixtures` builds, the prebuilt binaries `make corpus` downloads, and any folder named
// by MSGTRACE_CORPUS.
package testfiles

import (
	"encoding/base64"
	"encoding/binary"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// LibLDFlags is the -ldflags every build of cmd/libmsgtrace takes (the Makefile's LIBLDFLAGS):
// the library's Go runtime sends no asynchronous preemption signal (SIGURG) into the traced
// program, whose own SIGURG handler would get it.
const LibLDFlags = "-X=runtime.godebugDefault=asyncpreemptoff=1"

// Root returns the module root (the directory holding go.mod).
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

// IsMachO reports whether a file starts with a thin or universal Mach-O magic.
func IsMachO(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [8]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return false
	}
	switch binary.LittleEndian.Uint32(b[:]) {
	case 0xfeedfacf, 0xfeedface:
		return true
	}
	// Universal: 0xcafebabe is also Java's class-file magic; a class file's next word is its
	// version (45 and up), a universal header's the slice count.
	switch binary.BigEndian.Uint32(b[:]) {
	case 0xcafebabe, 0xcafebabf:
		return binary.BigEndian.Uint32(b[4:]) < 45
	}
	return false
}

// machOFiles lists the Mach-O files under dir, sorted.
func machOFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && IsMachO(p) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listing %s: %v", dir, err)
	}
	sort.Strings(out)
	return out
}

// Fixtures returns every Mach-O fixture built by `make fixtures`; when there are none it fails
// the test (every test over them would otherwise pass vacuously), or skips it in the fast tier
// (Missing).
func Fixtures(t testing.TB) []string {
	t.Helper()
	dir := filepath.Join(Root(t), "testdata", "fixtures")
	var files []string
	if exists(dir) {
		files = machOFiles(t, dir)
	}
	if len(files) == 0 {
		Missing(t, "the fixtures (testdata/fixtures: `make fixtures`, or `make test`)")
	}
	return files
}

// Corpus returns the Mach-O files of Go's debug/macho tests (GoDebugMachO), the downloaded
// prebuilt binaries (testdata/corpus, when `make corpus` ran) and every Mach-O file under
// $MSGTRACE_CORPUS.
func Corpus(t testing.TB) []string {
	t.Helper()
	out := GoDebugMachO(t)
	if dir := filepath.Join(Root(t), "testdata", "corpus"); exists(dir) {
		out = append(out, machOFiles(t, dir)...)
	}
	if dir := os.Getenv("MSGTRACE_CORPUS"); dir != "" {
		if !exists(dir) {
			t.Fatalf("MSGTRACE_CORPUS=%s: no such directory", dir)
		}
		out = append(out, machOFiles(t, dir)...)
	}
	return out
}

// All returns the fixtures followed by the corpus.
func All(t testing.TB) []string {
	t.Helper()
	return append(Fixtures(t), Corpus(t)...)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// GoDebugMachO decodes the Mach-O files that Go's own debug/macho tests use
// ($GOROOT/src/debug/macho/testdata/*.base64: i386 and x86_64 executables of gcc and clang,
// objects, a universal file, a dSYM and an executable with a malformed LC_DYSYMTAB) into a
// directory of the test's and returns them. It fails the test when there are none.
func GoDebugMachO(t testing.TB) []string {
	t.Helper()
	root := runtime.GOROOT()
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		root = strings.TrimSpace(string(out))
	}
	src := filepath.Join(root, "src", "debug", "macho", "testdata")
	ins, err := filepath.Glob(filepath.Join(src, "*.base64"))
	if err != nil || len(ins) == 0 {
		t.Fatalf("no *.base64 files in %s (the Go installation's debug/macho testdata)", src)
	}
	dir := t.TempDir()
	var out []string
	for _, in := range ins {
		b, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		data, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(string(b)), ""))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		p := filepath.Join(dir, strings.TrimSuffix(filepath.Base(in), ".base64"))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if IsMachO(p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}
