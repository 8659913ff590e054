package main

// A dylib's initializers, in the order dyld runs them: Go's initializer before ctor.c's
// msgtrace_ctor (checkInitializers), and the class with +load that anchors the launch images'
// categories (checkLoadAnchor).

import (
	"debug/macho"
	"fmt"
	"regexp"
	"strings"
)

// initializers lists a slice's initializers in the order dyld runs them (__mod_init_func
// pointers or __init_offsets offsets, section by section), each named by the symbol at its address.
func initializers(f *macho.File, chained bool) ([]string, error) {
	const sectionType = 0xff
	const modInitFuncPointers, initFuncOffsets = 0x9, 0x16
	names := map[uint64]string{}
	if f.Symtab != nil {
		for _, s := range f.Symtab.Syms {
			if s.Type&0xe0 == 0 && s.Type&0x0e == 0x0e && s.Value != 0 { // N_SECT, not a stab
				if _, ok := names[s.Value]; !ok {
					names[s.Value] = s.Name
				}
			}
		}
	}
	var base uint64
	for _, l := range f.Loads {
		if s, ok := l.(*macho.Segment); ok && s.Name == "__TEXT" {
			base = s.Addr
		}
	}
	name := func(addr uint64) string {
		if n, ok := names[addr]; ok {
			return n
		}
		return fmt.Sprintf("%#x", addr)
	}
	var out []string
	for _, s := range f.Sections {
		switch s.Flags & sectionType {
		case modInitFuncPointers:
			data, err := s.Data()
			if err != nil {
				return nil, fmt.Errorf("%s: %v", s.Name, err)
			}
			for i := 0; i+8 <= len(data); i += 8 {
				v := f.ByteOrder.Uint64(data[i:])
				if chained { // a rebase in the chain: the target's vmaddr (DYLD_CHAINED_PTR_64) or offset
					v &= 0xfffffffff
					if v < base {
						v += base
					}
				}
				out = append(out, name(v))
			}
		case initFuncOffsets:
			data, err := s.Data()
			if err != nil {
				return nil, fmt.Errorf("%s: %v", s.Name, err)
			}
			for i := 0; i+4 <= len(data); i += 4 {
				out = append(out, name(base+uint64(f.ByteOrder.Uint32(data[i:]))))
			}
		}
	}
	return out, nil
}

// goLibInit matches the initializer Go's linker gives a c-shared or c-archive build: it starts
// the Go runtime on a thread of its own (runtime/rt0_darwin_*.s, rt0_ios_arm64.s).
var goLibInit = regexp.MustCompile(`^__rt0_(arm64|amd64)_(darwin|ios)_lib$`)

// checkInitializers: Go's initializer first, ctor.c's msgtrace_ctor after it. The constructor
// calls into Go, which waits for the runtime that Go's initializer starts; in the other order
// it would wait for a runtime that nothing has started yet.
func checkInitializers(where string, f *macho.File, chained bool) string {
	inits, err := initializers(f, chained)
	if err != nil {
		fail(where, "initializers: %v", err)
		return "initializers UNREADABLE"
	}
	goAt, ctorAt := -1, -1
	for i, n := range inits {
		if goLibInit.MatchString(n) && goAt < 0 {
			goAt = i
		}
		if n == "_msgtrace_ctor" {
			ctorAt = i
		}
	}
	switch {
	case goAt < 0:
		fail(where, "no Go runtime initializer (__rt0_*_lib) among the initializers %v", inits)
	case ctorAt < 0:
		fail(where, "no _msgtrace_ctor among the initializers %v: nothing would install at load", inits)
	case goAt != 0 || ctorAt < goAt:
		fail(where, "initializers %v: Go's %s must run first and _msgtrace_ctor after it", inits, inits[goAt])
	}
	return "initializers " + strings.Join(inits, ", ")
}

// checkLoadAnchor: the library has a class with +load (__objc_nlclslist: anchor_darwin.m's),
// so that objc4 attaches the launch images' categories in the library's own load_images,
// before its initializer installs (README, launch).
func checkLoadAnchor(where string, f *macho.File) string {
	if f.Section("__objc_nlclslist") == nil {
		fail(where, "no __objc_nlclslist: the library's +load (anchor_darwin.m) is missing")
		return "+load class MISSING"
	}
	return "+load class (__objc_nlclslist)"
}
