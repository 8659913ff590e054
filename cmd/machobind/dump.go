package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/msgtrace/msgtrace/machobind"
)

// parseInterleaved parses flags that may come before or after the positional arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func dump(args []string, stdout io.Writer) error {
	fs := newFlags("dump")
	var opt machobind.DumpOptions
	fs.StringVar(&opt.Arch, "arch", "", "only this architecture (arm64, arm64e, x86_64, ...)")
	fs.StringVar(&opt.Symbol, "symbol", "", "only the slots of this symbol (objc_msgSend or _objc_msgSend)")
	asJSON := fs.Bool("json", false, "write JSON")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{fmt.Sprintf("dump takes one FILE, got %d", len(pos))}
	}
	d, derr := machobind.DumpFile(pos[0], opt)
	if d == nil {
		return derr
	}
	w := bufio.NewWriterSize(stdout, 1<<16)
	if *asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		err = enc.Encode(d)
	} else {
		err = writeText(w, d)
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return derr
}

func writeText(out io.Writer, d *machobind.Dump) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "file: %s", d.File)
	if d.Fat {
		fmt.Fprintf(w, " (universal, %d slices)", len(d.Slices))
	}
	fmt.Fprintln(w)
	for _, s := range d.Slices {
		fmt.Fprintf(w, "\nslice %s (offset %#x, size %#x)\n", s.Arch, s.Offset, s.Size)
		if s.Unsupported != "" {
			fmt.Fprintf(w, "  not read: %s\n", s.Unsupported)
			continue
		}
		if s.Error != "" && s.Filetype == "" {
			fmt.Fprintf(w, "  error: %s\n", s.Error)
			continue
		}
		fmt.Fprintf(w, "  header: cpu %s, subtype %s, filetype %s, %d-byte pointers\n", s.CPU, s.Subtype, s.Filetype, s.PointerWidth)
		fmt.Fprintf(w, "  flags: %s\n", strings.Join(s.Flags, " "))
		if s.Platform != "" {
			fmt.Fprintf(w, "  platform: %s %s\n", s.Platform, s.MinOS)
		}
		fixups := s.Fixups
		if len(s.PointerFormats) > 0 {
			fixups += " (" + strings.Join(s.PointerFormats, ", ") + ")"
		}
		if s.ExternalRelocations > 0 {
			fixups += fmt.Sprintf(" (%d external relocations bind outside the pointer tables)", s.ExternalRelocations)
		}
		fmt.Fprintf(w, "  fixups: %s\n", fixups)
		fmt.Fprintf(w, "  dylibs:\n")
		for _, dl := range s.Dylibs {
			fmt.Fprintf(w, "    %d\t%s\t(%s)\n", dl.Ordinal, dl.Path, dl.Kind)
		}
		fmt.Fprintf(w, "  segments:\n")
		for _, sg := range s.Segments {
			fmt.Fprintf(w, "    %s\tvm %s\t+%s\tfile %s\t+%s\t%s/%s\n", sg.Name, sg.VMAddr, sg.VMSize, sg.FileOff, sg.FileSize, sg.InitProt, sg.MaxProt)
			for _, sec := range sg.Sections {
				fmt.Fprintf(w, "      %s\t%s\t+%s\t\t%s\t\n", sec.Name, sec.Address, sec.Size, sec.Type)
			}
		}
		fmt.Fprintf(w, "  pointers: %d\n", len(s.Pointers))
		for _, p := range s.Pointers {
			sym, lib := p.Symbol, p.Library
			if p.LinkedLibrary != "" {
				lib += " (linked: " + p.LinkedLibrary + ")"
			}
			if p.Indirect != "" {
				sym, lib = "<"+p.Indirect+">", ""
			}
			weak := ""
			if p.Weak {
				weak = " weak"
			}
			fmt.Fprintf(w, "    %s\t%s\t%s\t%s\t%s%s\n", p.Section, p.Address, sym, lib, p.Kind, weak)
		}
		if s.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", s.Error)
		}
	}
	return w.Flush()
}
