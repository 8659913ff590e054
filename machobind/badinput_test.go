package machobind

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/msgtrace/msgtrace/internal/testfiles"
)

// checkNoPanic dumps data and fails when reading it panicked (dumpSlice turns a panic into an
// errInternal slice error so that the CLI survives; tests must not let that pass).
func checkNoPanic(t *testing.T, what string, data []byte) *Dump {
	t.Helper()
	d, err := DumpData(what, data, DumpOptions{})
	if err != nil && strings.Contains(err.Error(), errInternal) {
		t.Fatalf("%s: %v", what, err)
	}
	return d
}

func readFixture(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTruncated cuts every fixture at many lengths: each cut either fails with an error or
// yields only slots that the whole file also has (a correct partial result).
func TestTruncated(t *testing.T) {
	for _, file := range testfiles.Fixtures(t) {
		data := readFixture(t, file)
		full := checkNoPanic(t, file, data)
		whole := map[string]bool{}
		for _, s := range full.Slices {
			for _, p := range s.Pointers {
				whole[s.Arch+p.Section+p.Address+p.Symbol+p.Library] = true
			}
		}
		var cuts []int
		for n := 0; n < 512 && n < len(data); n++ {
			cuts = append(cuts, n)
		}
		for i := 1; i < 200; i++ {
			cuts = append(cuts, len(data)*i/200)
		}
		cuts = append(cuts, len(data)-1)
		for _, n := range cuts {
			d := checkNoPanic(t, file, data[:n])
			if d == nil {
				continue
			}
			for _, s := range d.Slices {
				for _, p := range s.Pointers {
					if !whole[s.Arch+p.Section+p.Address+p.Symbol+p.Library] {
						t.Fatalf("%s cut at %d: slot %s %s %s not in the whole file", filepath.Base(file), n, p.Section, p.Address, p.Symbol)
					}
				}
			}
		}
	}
}

// TestFlippedBytes flips random bytes in the header, load commands and __LINKEDIT.
func TestFlippedBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, file := range testfiles.Fixtures(t) {
		data := readFixture(t, file)
		for round := 0; round < 300; round++ {
			mut := append([]byte(nil), data...)
			for k := 0; k < 1+rng.IntN(8); k++ {
				var at int
				if rng.IntN(2) == 0 {
					at = rng.IntN(min(len(mut), 4096))
				} else {
					at = rng.IntN(len(mut))
				}
				mut[at] ^= byte(1 << rng.IntN(8))
			}
			checkNoPanic(t, file, mut)
		}
	}
}

// thinFixture returns the bytes of a thin 64-bit fixture.
func thinFixture(t *testing.T) []byte {
	for _, file := range testfiles.Fixtures(t) {
		data := readFixture(t, file)
		if binary.LittleEndian.Uint32(data) == 0xfeedfacf {
			return data
		}
	}
	t.Fatal("no thin fixture")
	return nil
}

// TestHostileHeaders builds specific malformed images and checks each yields a clear error.
func TestHostileHeaders(t *testing.T) {
	base := thinFixture(t)
	le := binary.LittleEndian
	mutate := func(f func(b []byte)) []byte {
		b := append([]byte(nil), base...)
		f(b)
		return b
	}
	fat := func(off, size uint32) []byte {
		b := make([]byte, 4096)
		be := binary.BigEndian
		be.PutUint32(b, 0xcafebabe)
		be.PutUint32(b[4:], 1)
		be.PutUint32(b[8:], 0x0100000c)
		be.PutUint32(b[16:], off)
		be.PutUint32(b[20:], size)
		return b
	}
	cases := map[string]struct {
		data []byte
		want string
	}{
		"sizeofcmds huge":    {mutate(func(b []byte) { le.PutUint32(b[20:], 0xfffffff0) }), "load commands"},
		"ncmds huge":         {mutate(func(b []byte) { le.PutUint32(b[16:], 0xffffffff) }), "runs past sizeofcmds"},
		"first cmdsize 0":    {mutate(func(b []byte) { le.PutUint32(b[32+4:], 0) }), "bad cmdsize"},
		"first cmdsize huge": {mutate(func(b []byte) { le.PutUint32(b[32+4:], 0xfffffff8) }), "bad cmdsize"},
		"fat past EOF":       {fat(4096, 1<<30), "past the end"},
		"fat offset past":    {fat(0xfffff000, 16), "past the end"},
		"fat count huge": {func() []byte {
			b := fat(4096, 16)
			binary.BigEndian.PutUint32(b[4:], 0x7fffffff)
			return b
		}(), "architectures"},
		"empty":   {[]byte{}, "too short"},
		"garbage": {[]byte("#!/bin/sh\necho not a binary\n"), "not a Mach-O"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := DumpData(name, c.data, DumpOptions{})
			if err == nil {
				t.Fatalf("no error; dump: %+v", d)
			}
			if strings.Contains(err.Error(), errInternal) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
		})
	}
}

// TestSymtabIndicesOutOfRange points the indirect table and symbol table past __LINKEDIT.
func TestSymtabIndicesOutOfRange(t *testing.T) {
	base := thinFixture(t)
	f, err := NewFile(base)
	if err != nil {
		t.Fatal(err)
	}
	img, err := f.Slices[0].Parse()
	if err != nil {
		t.Fatal(err)
	}
	// Find the LC_DYSYMTAB command's offset in the file to corrupt its fields.
	le := binary.LittleEndian
	off := 32
	dysym, symtab := -1, -1
	for i := 0; i < int(img.Header.NCommands); i++ {
		switch le.Uint32(base[off:]) {
		case 0xb:
			dysym = off
		case 0x2:
			symtab = off
		}
		off += int(le.Uint32(base[off+4:]))
	}
	if dysym < 0 || symtab < 0 {
		t.Fatal("fixture lacks LC_SYMTAB/LC_DYSYMTAB")
	}
	for name, f := range map[string]func(b []byte){
		"indirectsymoff":   func(b []byte) { le.PutUint32(b[dysym+56:], 0xfffffff0) },
		"nindirectsyms":    func(b []byte) { le.PutUint32(b[dysym+60:], 0x7fffffff) },
		"nsyms zero":       func(b []byte) { le.PutUint32(b[symtab+12:], 0) },
		"symoff past":      func(b []byte) { le.PutUint32(b[symtab+8:], 0xffffff00) },
		"strsize too long": func(b []byte) { le.PutUint32(b[symtab+20:], 0x7fffffff) },
		"strtab unterminated": func(b []byte) {
			stroff, strsize := le.Uint32(b[symtab+16:]), le.Uint32(b[symtab+20:])
			for i := stroff; i < stroff+strsize; i++ {
				b[i] = 'A'
			}
		},
	} {
		b := append([]byte(nil), base...)
		f(b)
		_, err := DumpData(name, b, DumpOptions{})
		if err == nil || strings.Contains(err.Error(), errInternal) {
			t.Errorf("%s: want a clear error, got %v", name, err)
		}
	}
}

// FuzzDump runs the whole dump path over mutated fixtures and Go's debug/macho test files
// (i386 and universal images, objects): it may fail, never panic or hang.
func FuzzDump(f *testing.F) {
	for _, file := range append(testfiles.Fixtures(f), testfiles.GoDebugMachO(f)...) {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) < 1<<20 { // the Go-built fixtures (2 MB) only slow the mutator down
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkNoPanic(t, "fuzz", data)
	})
}
