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
	"github.com/msgtrace/msgtrace/machobind/classdump"
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
	classes := fs.Bool("classes", false, "the Objective-C classes and categories with their methods, and the Swift types with their vtables, instead of the pointer slots")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError{fmt.Sprintf("dump takes one FILE, got %d", len(pos))}
	}
	if *classes {
		if opt.Symbol != "" {
			return usageError{"dump --classes takes no -symbol"}
		}
		return dumpClasses(pos[0], opt.Arch, *asJSON, stdout)
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

func dumpClasses(path, arch string, asJSON bool, stdout io.Writer) error {
	d, err := classdump.DumpClasses(path, arch)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(stdout, 1<<16)
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		err = enc.Encode(d)
	} else {
		err = writeClassesText(w, d)
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// writeClassesText writes what dump --classes found: each class by its runtime name (what
// MSGTRACE_METHODS and the traces' JSON call it) and, for a Swift class, as people write it.
func writeClassesText(out io.Writer, d *classdump.ClassesDump) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "file: %s", d.File)
	if d.Fat {
		fmt.Fprintf(w, " (universal, %d slices)", d.Arches)
	}
	fmt.Fprintln(w)
	for _, s := range d.Slices {
		c := s.Counts
		fmt.Fprintf(w, "\nslice %s\n", s.Arch)
		for _, e := range s.Errors {
			fmt.Fprintf(w, "  error: %s\n", e)
		}
		fmt.Fprintf(w, "  objc classes: %d (%d Swift), %d methods, %d in %d categories, %d +load\n", c.ObjCClasses, c.SwiftObjC, c.ObjCMethods, c.CategoryMethods, len(s.Categories), c.Load)
		for _, cl := range s.Classes {
			name := cl.Name
			if cl.Display != "" {
				name += " (" + cl.Display + ")"
			}
			var attrs []string
			if cl.Superclass != "" {
				attrs = append(attrs, "superclass "+cl.Superclass)
			}
			if cl.Swift {
				attrs = append(attrs, "swift")
			}
			if cl.NonLazy {
				attrs = append(attrs, "non-lazy")
			}
			fmt.Fprintf(w, "  class %s\t%s\t%s\n", name, cl.Address, strings.Join(attrs, ", "))
			writeMethods(w, cl.Methods)
		}
		for _, cat := range s.Categories {
			cls := cat.Class
			if cat.Display != "" {
				cls += " (" + cat.Display + ")"
			}
			nl := ""
			if cat.NonLazy {
				nl = "non-lazy"
			}
			fmt.Fprintf(w, "  category %s on %s\t%s\t%s\n", cat.Name, cls, cat.Address, nl)
			writeMethods(w, cat.Methods)
		}
		fmt.Fprintf(w, "  swift types: %d (%d classes, %d vtable methods, %d dynamic, %d with a ptrauth discriminator)\n", c.SwiftTypes, c.SwiftClasses, c.VTableMethods, c.DynamicMethods, c.PtrauthMethods)
		for _, t := range s.SwiftTypes {
			var attrs []string
			if t.Superclass != "" {
				attrs = append(attrs, "superclass "+t.Superclass)
			}
			if t.VTable != nil {
				attrs = append(attrs, fmt.Sprintf("vtable at word %d, %d methods", t.VTable.Offset, t.VTable.Size))
			}
			if t.Overrides > 0 {
				attrs = append(attrs, fmt.Sprintf("%d overrides", t.Overrides))
			}
			fmt.Fprintf(w, "    %s %s\t%s\t%s\n", t.Kind, t.Name, t.Address, strings.Join(attrs, ", "))
			if t.VTable == nil {
				continue
			}
			for _, m := range t.VTable.Methods {
				var fl []string
				if m.Instance {
					fl = append(fl, "instance")
				} else {
					fl = append(fl, "static")
				}
				if m.Dynamic {
					fl = append(fl, "dynamic")
				}
				if m.Async {
					fl = append(fl, "async")
				}
				if m.Discriminator != 0 {
					fl = append(fl, fmt.Sprintf("ptrauth %#04x", m.Discriminator))
				}
				fmt.Fprintf(w, "      [%d] %s\t%s\t%s\t%s\n", m.Slot, m.Kind, strings.Join(fl, " "), m.Impl, m.Symbol)
			}
		}
	}
	return w.Flush()
}

func writeMethods(w io.Writer, ms []classdump.ObjCMethodDump) {
	for _, m := range ms {
		load := ""
		if m.Load {
			load = "+load: runs at image load"
		}
		fmt.Fprintf(w, "    %s\t%s\t%s\t%s\n", m.Name, m.Imp, m.Types, load)
	}
}
