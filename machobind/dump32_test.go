package machobind

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blacktop/go-macho/types"

	"github.com/msgtrace/msgtrace/internal/testfiles"
)

// goDebugFile returns one of Go's debug/macho test files, decoded.
func goDebugFile(t *testing.T, name string) string {
	t.Helper()
	for _, f := range testfiles.GoDebugMachO(t) {
		if filepath.Base(f) == name {
			return f
		}
	}
	t.Fatalf("%s is not among Go's debug/macho test files", name)
	return ""
}

// TestDump32Bit: i386 images are read with 4-byte slots; gcc's i386 executable binds through
// __IMPORT,__jump_table (5-byte self-modifying jumps) from the indirect symbol table.
func TestDump32Bit(t *testing.T) {
	d, err := DumpFile(goDebugFile(t, "gcc-386-darwin-exec"), DumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := d.Slices[0]
	if s.Arch != "i386" || s.PointerWidth != 4 || s.Fixups != "relocations" {
		t.Fatalf("arch %s, pointer width %d, fixups %q; want i386, 4, relocations", s.Arch, s.PointerWidth, s.Fixups)
	}
	want := []PointerDump{
		{Section: "__IMPORT,__jump_table", Address: "0x3000", Symbol: "_exit", Library: "/usr/lib/libSystem.B.dylib", Kind: "jump-table", Ordinal: 2},
		{Section: "__IMPORT,__jump_table", Address: "0x3005", Symbol: "_puts", Library: "/usr/lib/libSystem.B.dylib", Kind: "jump-table", Ordinal: 2},
	}
	if len(s.Pointers) != len(want) {
		t.Fatalf("%d slots, want %d: %+v", len(s.Pointers), len(want), s.Pointers)
	}
	for i, w := range want {
		if s.Pointers[i] != w {
			t.Errorf("slot %d: %+v, want %+v", i, s.Pointers[i], w)
		}
	}

	d, err = DumpFile(goDebugFile(t, "clang-386-darwin-exec-with-rpath"), DumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s = d.Slices[0]
	var lazy []string
	for _, p := range s.Pointers {
		if p.Kind == "lazy" {
			lazy = append(lazy, p.Address+" "+p.Symbol)
		}
	}
	if s.Fixups != "classic" || strings.Join(lazy, ",") != "0x2008 _printf" {
		t.Errorf("clang i386: fixups %q, lazy slots %v; want classic and one 4-byte slot for printf at 0x2008", s.Fixups, lazy)
	}
}

// TestDumpArm64_32 links a watchOS arm64_32 dylib (ld64.lld-19) and reads it: 4-byte slots,
// cross-checked with llvm-objdump.
func TestDumpArm64_32(t *testing.T) {
	testfiles.NeedTools(t, "clang-19", "ld64.lld-19")
	dir := t.TempDir()
	src, lib := filepath.Join(dir, "w.c"), filepath.Join(dir, "libw.dylib")
	os.WriteFile(src, []byte("extern int ext_fn(int);\nextern int ext_data;\nint call(int x) { return ext_fn(x) + ext_data; }\n"), 0o644)
	args := []string{"-target", "arm64_32-apple-watchos7", "-fuse-ld=lld", "-nostdlib", "-dynamiclib", "-O1",
		"-Wl,-undefined,dynamic_lookup", "-o", lib, src}
	if out, err := exec.Command("clang-19", args...).CombinedOutput(); err != nil {
		t.Fatalf("clang-19 %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	d, err := DumpFile(lib, DumpOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := d.Slices[0]
	if s.Arch != "arm64_32" || s.PointerWidth != 4 || s.Platform != "watchOS" {
		t.Fatalf("arch %s, pointer width %d, platform %q", s.Arch, s.PointerWidth, s.Platform)
	}
	got := map[string]string{}
	for _, p := range s.Pointers {
		got[p.Symbol] = p.Kind + " " + p.Library
	}
	if got["_ext_fn"] != "lazy flat-namespace" || got["_ext_data"] != "non-lazy flat-namespace" {
		t.Errorf("slots %v", got)
	}
	f, err := Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	crossCheckSlice(t, lib, false, f.Slices[0])
}

// TestDumpUnsupportedSlice: a universal file with a PowerPC slice names that slice and what
// it is, reads the others and is no error; a file of PowerPC alone is one.
func TestDumpUnsupportedSlice(t *testing.T) {
	x86, err := os.ReadFile(goDebugFile(t, "gcc-amd64-darwin-exec"))
	if err != nil {
		t.Fatal(err)
	}
	be := binary.BigEndian
	ppc := make([]byte, 28) // mach_header: MH_MAGIC, CPU_TYPE_POWERPC, MH_EXECUTE, no commands
	be.PutUint32(ppc, 0xfeedface)
	be.PutUint32(ppc[4:], 18)
	be.PutUint32(ppc[12:], 2)
	fat := make([]byte, 0x2000+len(x86))
	be.PutUint32(fat, 0xcafebabe)
	be.PutUint32(fat[4:], 2)
	for i, e := range [][3]uint32{{18, 0x1000, uint32(len(ppc))}, {0x01000007, 0x2000, uint32(len(x86))}} {
		at := 8 + 20*i
		be.PutUint32(fat[at:], e[0])
		be.PutUint32(fat[at+8:], e[1])
		be.PutUint32(fat[at+12:], e[2])
		be.PutUint32(fat[at+16:], 12)
	}
	copy(fat[0x1000:], ppc)
	copy(fat[0x2000:], x86)
	d, err := DumpData("ppc-x86_64", fat, DumpOptions{})
	if err != nil {
		t.Fatalf("a readable x86_64 slice next to a PowerPC one: %v", err)
	}
	if len(d.Slices) != 2 || d.Slices[0].Arch != "ppc" || !strings.Contains(d.Slices[0].Unsupported, "big-endian ppc") ||
		d.Slices[0].Error != "" || len(d.Slices[1].Pointers) != 2 || d.Slices[1].Error != "" {
		t.Fatalf("slices %+v", d.Slices)
	}
	if _, err := DumpData("ppc", ppc, DumpOptions{}); err == nil || !strings.Contains(err.Error(), "ppc") {
		t.Fatalf("a PowerPC file alone: %v, want an error naming ppc", err)
	}
}

// TestArchNames32: 32-bit ARM slices are named as lipo and llvm-objdump name them.
func TestArchNames32(t *testing.T) {
	for sub, want := range map[uint32]string{6: "armv6", 9: "armv7", 11: "armv7s", 12: "armv7k", 0: "arm"} {
		if got := ArchName(types.CPUArm, types.CPUSubtype(sub)); got != want {
			t.Errorf("ArchName(arm, %d) = %s, want %s", sub, got, want)
		}
	}
	if got := ArchName(types.CPUArm6432, 1); got != "arm64_32" {
		t.Errorf("arm64_32: %s", got)
	}
}
