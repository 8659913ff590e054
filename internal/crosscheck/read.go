package main

// Reading an artifact: machobind dump's JSON, debug/macho's symbols and LC_ID_DYLIB, and the
// slices of a thin or universal file.

import (
	"bytes"
	"debug/macho"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/msgtrace/msgtrace/machobind"
)

// runDump runs `machobind dump --json` on a file and decodes it into machobind's own schema.
func runDump(file string) (*machobind.Dump, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(*flagMachobind, "dump", "--json", file)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("machobind dump: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var d machobind.Dump
	if err := json.Unmarshal(out, &d); err != nil {
		return nil, fmt.Errorf("machobind dump --json: %v", err)
	}
	return &d, nil
}

// symbols of one Mach-O slice: exported (external, defined, not private extern), defined
// external (private extern too: those still link across the objects of one image) and undefined.
type symbols struct {
	exported, defined, undefined map[string]bool
}

func readSymbols(f *macho.File) symbols {
	s := symbols{map[string]bool{}, map[string]bool{}, map[string]bool{}}
	if f.Symtab == nil {
		return s
	}
	for _, sym := range f.Symtab.Syms {
		const nStab, nPext, nType, nExt, nUndf = 0xe0, 0x10, 0x0e, 0x01, 0x0
		switch {
		case sym.Type&nStab != 0 || sym.Type&nExt == 0:
		case sym.Type&nType == nUndf && sym.Value == 0:
			s.undefined[sym.Name] = true
		default:
			s.defined[sym.Name] = true
			if sym.Type&nPext == 0 {
				s.exported[sym.Name] = true
			}
		}
	}
	return s
}

// idDylib returns the LC_ID_DYLIB name.
func idDylib(f *macho.File) string {
	for _, l := range f.Loads {
		raw := l.Raw()
		if len(raw) >= 24 && f.ByteOrder.Uint32(raw) == 0xd {
			off := f.ByteOrder.Uint32(raw[8:])
			if int(off) < len(raw) {
				name := raw[off:]
				if i := bytes.IndexByte(name, 0); i >= 0 {
					name = name[:i]
				}
				return string(name)
			}
		}
	}
	return ""
}

// slicesOf opens a thin or universal Mach-O file: arch name (as machobind spells it) -> file.
func slicesOf(path string) (map[string]*macho.File, func(), error) {
	archName := func(c macho.Cpu) string {
		switch c {
		case macho.CpuArm64:
			return "arm64"
		case macho.CpuAmd64:
			return "x86_64"
		}
		return c.String()
	}
	if ff, err := macho.OpenFat(path); err == nil {
		m := map[string]*macho.File{}
		for _, a := range ff.Arches {
			m[archName(a.Cpu)] = a.File
		}
		return m, func() { ff.Close() }, nil
	} else if !errors.Is(err, macho.ErrNotFat) {
		return nil, nil, err
	}
	f, err := macho.Open(path)
	if err != nil {
		return nil, nil, err
	}
	return map[string]*macho.File{archName(f.Cpu): f}, func() { f.Close() }, nil
}

func isObjcMsgSend(name string) bool { return strings.HasPrefix(name, "_objc_msgSend") }
