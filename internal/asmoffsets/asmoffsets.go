// Package asmoffsets generates asm_offsets.h, the offsets and sizes of the C structs that the
// assembly (msgsend_*.S, trampoline_*.S) reads and writes, so that no offset is kept by hand.
//
// As Linux's asm-offsets does, it asks the C compiler itself: a probe file includes rt.h and
// trampoline.h and passes offsetof() and sizeof() of every listed field as immediates to an
// inline-asm .ascii directive; the compiler's assembly output (-S, nothing is assembled, linked
// or run) carries "->NAME value" lines that are read back. The probe is compiled for every target
// msgtrace builds for whose compiler is on this machine (the host C compiler always; the aarch64
// cross gcc; clang for darwin and ios, amd64 and arm64): all are LP64 with natural alignment, so
// one set of values must hold for all, and Generate fails naming the first that differs. The
// header it writes also has each C build assert its values against the structs it compiles
// (MT_CHECK_* after their definitions), so a build for a target the generator did not measure
// fails rather than runs with wrong offsets.
//
// `go generate` in the repository root writes the file (gen/); TestAsmOffsetsCurrent in the
// root package regenerates it in memory and fails when the committed one is stale.
package asmoffsets

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Struct is a C struct the assembly uses: each field's offset becomes Prefix + FIELD (upper
// case), its size Size and, when the assembly divides or multiplies by shifting, Shift =
// log2(size) (the size must then be a power of two).
type Struct struct {
	Name   string // the C tag: struct Name
	Header string // where it is defined
	Prefix string
	Fields []string
	Size   string // "" for a struct with a flexible array member
	Shift  string
}

// Structs lists what asm_offsets.h defines, in its order: the fields the assembly uses (and
// T_STACK, which rt.c checks), each struct's size.
var Structs = []Struct{
	{Name: "mt_entry", Header: "rt.h", Prefix: "E_", Size: "ENTRY_SIZE", Shift: "ENTRY_SHIFT",
		Fields: []string{"ret", "sp", "start", "cls", "sel", "save", "rv0", "rv1", "owner"}},
	{Name: "mt_record", Header: "rt.h", Prefix: "R_", Size: "RECORD_SIZE",
		Fields: []string{"start", "end", "cls", "sel"}},
	{Name: "mt_thread", Header: "rt.h", Prefix: "T_",
		Fields: []string{"top", "limit", "base", "rec_cur", "rec_end", "dropped", "overflow", "busy", "scratch", "stack"}},
	{Name: "mt_tramp_data", Header: "trampoline.h", Prefix: "MD_", Size: "MD_SIZE",
		Fields: []string{"orig", "cls", "sel"}}, // method: C's bookkeeping only
}

// Target is a compiler invocation for one platform msgtrace builds for.
type Target struct {
	Name string
	CC   []string // the compiler and its target flags
}

// Targets returns the platforms to measure: the host C compiler ($CC, else cc) first, then the
// cross compilers.
func Targets() []Target {
	host := strings.Fields(os.Getenv("CC"))
	if len(host) == 0 {
		host = []string{"cc"}
	}
	clang := "clang-19"
	if _, err := exec.LookPath(clang); err != nil {
		clang = "clang"
	}
	return []Target{
		{"host", host},
		{"linux/arm64 (gcc)", []string{"aarch64-linux-gnu-gcc"}},
		{"linux/amd64 (clang)", []string{clang, "-target", "x86_64-linux-gnu"}},
		{"darwin/arm64", []string{clang, "-target", "arm64-apple-macos11"}},
		{"darwin/amd64", []string{clang, "-target", "x86_64-apple-macos10.13"}},
		{"ios/arm64", []string{clang, "-target", "arm64-apple-ios14"}},
		{"ios/arm64 simulator", []string{clang, "-target", "arm64-apple-ios14-simulator"}},
		{"ios/amd64 simulator", []string{clang, "-target", "x86_64-apple-ios14-simulator"}},
	}
}

// Value is one constant of the header.
type Value struct {
	Name  string
	Value int64
}

// probe is the C file the compiler measures: rt.h and trampoline.h without asm_offsets.h
// (MT_OFFSETS_PROBE), whose values may be the stale ones being replaced.
func probe() string {
	var b strings.Builder
	b.WriteString(`#define MT_OFFSETS_PROBE 1
#include "rt.h"
#include "trampoline.h"
#define OUT(name, v) __asm__ volatile("\n.ascii \"->" #name " %c0\"" : : "i"((long)(v)))
void mt_offsets_probe(void);
void mt_offsets_probe(void) {
	OUT(POINTER_SIZE, sizeof(void *));
	OUT(LONG_SIZE, sizeof(long));
`)
	for _, s := range Structs {
		for _, f := range s.Fields {
			fmt.Fprintf(&b, "\tOUT(%s%s, offsetof(struct %s, %s));\n", s.Prefix, strings.ToUpper(f), s.Name, f)
		}
		if s.Size != "" {
			fmt.Fprintf(&b, "\tOUT(%s, sizeof(struct %s));\n", s.Size, s.Name)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

var outLine = regexp.MustCompile(`->([A-Z0-9_]+) [$#]?(-?[0-9]+)`)

// Measure compiles the probe against the headers in root for one target and returns the
// values it printed, in the probe's order.
func Measure(root string, tg Target) ([]Value, error) {
	dir, err := os.MkdirTemp("", "asmoffsets")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "probe.c")
	if err := os.WriteFile(src, []byte(probe()), 0o644); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	// freestanding: stddef.h and stdint.h are the compiler's own, no target libc needed
	args := append(append([]string{}, tg.CC[1:]...), "-std=gnu11", "-ffreestanding", "-S", "-o", "-", "-I", abs, src)
	cmd := exec.Command(tg.CC[0], args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %v\n%s", tg.Name, strings.Join(tg.CC, " "), err, stderr.Bytes())
	}
	var vals []Value
	for _, m := range outLine.FindAllSubmatch(out, -1) {
		v, err := strconv.ParseInt(string(m[2]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %v", tg.Name, m[0], err)
		}
		vals = append(vals, Value{string(m[1]), v})
	}
	return vals, nil
}

// Generate measures the structs for every target whose compiler is installed (the first,
// the host's, must be) and returns the header and the names of the targets measured. Targets
// nil means Targets().
func Generate(root string, targets []Target) ([]byte, []string, error) {
	if targets == nil {
		targets = Targets()
	}
	var ref []Value
	var measured []string
	for i, tg := range targets {
		if _, err := exec.LookPath(tg.CC[0]); err != nil {
			if i == 0 {
				return nil, nil, fmt.Errorf("no C compiler for %s: %v", tg.Name, err)
			}
			continue
		}
		vals, err := Measure(root, tg)
		if err != nil {
			return nil, nil, err
		}
		if ref == nil {
			ref = vals
		} else if err := same(ref, vals); err != nil {
			return nil, nil, fmt.Errorf("%s and %s disagree: %v", targets[0].Name, tg.Name, err)
		}
		measured = append(measured, tg.Name)
	}
	hdr, err := render(ref)
	return hdr, measured, err
}

func same(a, b []Value) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d values against %d", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return fmt.Errorf("%s = %d against %s = %d", a[i].Name, a[i].Value, b[i].Name, b[i].Value)
		}
	}
	return nil
}

func render(vals []Value) ([]byte, error) {
	want := 2
	for _, s := range Structs {
		want += len(s.Fields)
		if s.Size != "" {
			want++
		}
	}
	if len(vals) != want {
		return nil, fmt.Errorf("the probe printed %d values, want %d", len(vals), want)
	}
	if vals[0].Value != 8 || vals[1].Value != 8 {
		return nil, fmt.Errorf("not LP64: pointers %d bytes, long %d", vals[0].Value, vals[1].Value)
	}
	vals = vals[2:]
	var b bytes.Buffer
	b.WriteString(`/* Code generated by go run ./internal/asmoffsets/gen; DO NOT EDIT. */
/*
 * Offsets and sizes of the structs the assembly reads and writes, measured by the C compiler
 * (offsetof, sizeof) from their definitions: ` + "`go generate`" + ` in the repository root writes this
 * file (internal/asmoffsets says how), TestAsmOffsetsCurrent fails when it is stale.
 *
 * One set of values holds for every target: linux, darwin and ios on amd64 and arm64 are all
 * LP64 with natural alignment (the generator measures each whose compiler it finds and fails if
 * any differs). Each C build checks them against the structs it compiles: MT_CHECK_<STRUCT>
 * after the definition.
 */
#ifndef MSGTRACE_ASM_OFFSETS_H
#define MSGTRACE_ASM_OFFSETS_H
`)
	var checks bytes.Buffer
	k := 0
	for _, s := range Structs {
		fmt.Fprintf(&b, "\n/* struct %s (%s) */\n", s.Name, s.Header)
		var asserts []string
		for _, f := range s.Fields {
			v := vals[k]
			k++
			fmt.Fprintf(&b, "#define %-12s %d\n", v.Name, v.Value)
			asserts = append(asserts, fmt.Sprintf("MT_STATIC_ASSERT(offsetof(struct %s, %s) == %s, %q)", s.Name, f, v.Name, v.Name))
		}
		if s.Size != "" {
			v := vals[k]
			k++
			fmt.Fprintf(&b, "#define %-12s %d\n", v.Name, v.Value)
			asserts = append(asserts, fmt.Sprintf("MT_STATIC_ASSERT(sizeof(struct %s) == %s, %q)", s.Name, v.Name, v.Name))
			if s.Shift != "" {
				if v.Value <= 0 || v.Value&(v.Value-1) != 0 {
					return nil, fmt.Errorf("%s = %d: %s needs a power of two", v.Name, v.Value, s.Shift)
				}
				shift := 0
				for 1<<shift != v.Value {
					shift++
				}
				fmt.Fprintf(&b, "#define %-12s %d /* %s == 1 << %s */\n", s.Shift, shift, v.Name, s.Shift)
			}
		}
		fmt.Fprintf(&checks, "#define MT_CHECK_%s \\\n\t%s\n", strings.ToUpper(s.Name), strings.Join(asserts, "; \\\n\t"))
	}
	b.WriteString(`
#ifndef __ASSEMBLER__
#include <stddef.h>
#ifdef __cplusplus
#define MT_STATIC_ASSERT static_assert
#else
#define MT_STATIC_ASSERT _Static_assert
#endif
MT_STATIC_ASSERT(sizeof(void *) == 8 && sizeof(long) == 8, "msgtrace's targets are LP64");
`)
	b.Write(checks.Bytes())
	b.WriteString("#endif\n#endif\n")
	return b.Bytes(), nil
}
