// Package classdump reads what `machobind dump --classes` shows of a Mach-O file: the
// Objective-C classes and categories it defines with their methods, and its Swift types with
// their vtables. It is apart from package machobind because go-macho's File (which it reads
// with) links crypto/x509, and with it Apple's Security framework, into whatever imports it:
// the traced library must not.
package classdump

import (
	"fmt"
	"sort"
	"strings"

	"github.com/blacktop/go-macho"
	"github.com/blacktop/go-macho/types/objc"
	"github.com/blacktop/go-macho/types/swift"
	"github.com/msgtrace/msgtrace/swiftname"
)

// ClassesDump is what `machobind dump --classes` shows of a Mach-O file: the Objective-C
// classes and categories each slice defines, with their methods, and its Swift types.
type ClassesDump struct {
	File string `json:"file"`
	Fat  bool   `json:"fat"`
	// Arches counts the file's slices, those Slices leaves out (--arch) included.
	Arches int                `json:"arches"`
	Slices []ClassesSliceDump `json:"slices"`
}

// ClassesSliceDump is one architecture's classes. Errors reading one table are reported in
// Errors and the other tables still are.
type ClassesSliceDump struct {
	Arch       string             `json:"arch"`
	Errors     []string           `json:"errors,omitempty"`
	Classes    []ObjCClassDump    `json:"objc_classes"`
	Categories []ObjCCategoryDump `json:"objc_categories"`
	SwiftTypes []SwiftTypeDump    `json:"swift_types"`
	Counts     ClassesCountsDump  `json:"counts"`
	Protocols  []string           `json:"objc_protocols,omitempty"`
}

// ClassesCountsDump sums a slice up.
type ClassesCountsDump struct {
	ObjCClasses     int `json:"objc_classes"`
	SwiftObjC       int `json:"swift_objc_classes"` // Objective-C classes that are Swift classes
	ObjCMethods     int `json:"objc_methods"`
	Load            int `json:"load_methods"`
	SwiftTypes      int `json:"swift_types"`
	SwiftClasses    int `json:"swift_classes"`
	VTableMethods   int `json:"swift_vtable_methods"`
	DynamicMethods  int `json:"swift_dynamic_methods"`
	PtrauthMethods  int `json:"swift_ptrauth_discriminated_methods"`
	CategoryMethods int `json:"category_methods"`
}

// ObjCClassDump is a class of __objc_classlist. Name is the runtime name (what the
// Objective-C runtime, MSGTRACE_METHODS and the traces call it); Display the name as people
// write it, set for a Swift class (_TtC11ApertureCLI4Once: ApertureCLI.Once).
type ObjCClassDump struct {
	Name       string           `json:"name"`
	Display    string           `json:"display,omitempty"`
	Superclass string           `json:"superclass,omitempty"`
	Address    string           `json:"address"`
	Swift      bool             `json:"swift,omitempty"`
	NonLazy    bool             `json:"non_lazy,omitempty"` // in __objc_nlclslist: realized at load (it has +load)
	Methods    []ObjCMethodDump `json:"methods"`
}

// ObjCMethodDump is one method: Name "-[Class sel]" or "+[Class sel]" as a trace names it
// (runtime class name), its selector, type encoding and implementation address. Load marks
// +load, which the runtime calls while it loads the image.
type ObjCMethodDump struct {
	Name     string `json:"name"`
	Selector string `json:"selector"`
	Class    bool   `json:"class_method,omitempty"`
	Types    string `json:"types,omitempty"`
	Imp      string `json:"imp"`
	Load     bool   `json:"load,omitempty"`
}

// ObjCCategoryDump is a category of __objc_catlist: the methods it adds to Class.
type ObjCCategoryDump struct {
	Name    string           `json:"name"`
	Class   string           `json:"class"`
	Display string           `json:"display,omitempty"`
	Address string           `json:"address"`
	NonLazy bool             `json:"non_lazy,omitempty"`
	Methods []ObjCMethodDump `json:"methods"`
}

// SwiftTypeDump is a type of __swift5_types: its kind (class, struct, enum, ...), its name
// with its parents (Module.Outer.Name), and for a class its superclass and vtable.
type SwiftTypeDump struct {
	Kind       string           `json:"kind"`
	Name       string           `json:"name"`
	Address    string           `json:"address"`
	Superclass string           `json:"superclass,omitempty"`
	VTable     *SwiftVTableDump `json:"vtable,omitempty"`
	Overrides  int              `json:"overrides,omitempty"` // method override descriptors
}

// SwiftVTableDump is a class's own vtable: Offset is where its entries start in the class
// metadata (in words), Methods its method descriptors in slot order.
type SwiftVTableDump struct {
	Offset  uint32            `json:"offset"`
	Size    uint32            `json:"size"`
	Methods []SwiftMethodDump `json:"methods"`
}

// SwiftMethodDump is a vtable method descriptor: kind (method, init, getter, setter, modify,
// read), flags, the pointer-authentication discriminator arm64e signs the slot with, and the
// implementation's address and symbol when the symbol table names it.
type SwiftMethodDump struct {
	Slot          int    `json:"slot"`
	Kind          string `json:"kind"`
	Instance      bool   `json:"instance"`
	Dynamic       bool   `json:"dynamic,omitempty"`
	Async         bool   `json:"async,omitempty"`
	Discriminator uint16 `json:"ptrauth_discriminator,omitempty"`
	Impl          string `json:"impl,omitempty"`
	Symbol        string `json:"symbol,omitempty"`
}

// DumpClasses reads the Objective-C and Swift metadata of a Mach-O file (each slice, or arch
// only) with go-macho's objc and swift readers.
func DumpClasses(path, arch string) (*ClassesDump, error) {
	d := &ClassesDump{File: path}
	var files []*macho.File
	if ff, err := macho.OpenFat(path); err == nil {
		defer ff.Close()
		d.Fat = true
		for _, a := range ff.Arches {
			files = append(files, a.File)
		}
	} else {
		f, err := macho.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		files = append(files, f)
	}
	d.Arches = len(files)
	for _, f := range files {
		name := archName(f)
		if arch != "" && name != arch {
			continue
		}
		d.Slices = append(d.Slices, classesOf(f, name))
	}
	if arch != "" && len(d.Slices) == 0 {
		return nil, fmt.Errorf("%s: no %s slice", path, arch)
	}
	return d, nil
}

func archName(f *macho.File) string {
	s := strings.ToLower(f.SubCPU.String(f.CPU))
	switch {
	case f.CPU == 0x0100000c && s == "arm64e":
		return "arm64e"
	case f.CPU == 0x0100000c:
		return "arm64"
	case f.CPU == 0x01000007:
		if strings.Contains(s, "h") {
			return "x86_64h"
		}
		return "x86_64"
	}
	return strings.ToLower(f.CPU.String())
}

// guarded runs a go-macho reader, turning a panic on a malformed table into an error.
func guarded(what string, errs *[]string, fn func() error) {
	defer func() {
		if r := recover(); r != nil {
			*errs = append(*errs, fmt.Sprintf("%s: %v", what, r))
		}
	}()
	if err := fn(); err != nil {
		*errs = append(*errs, fmt.Sprintf("%s: %v", what, err))
	}
}

func display(name string) string {
	if d := swiftname.Demangle(name); d != name {
		return d
	}
	return ""
}

func methods(cls string, list []objc.Method, class bool, out []ObjCMethodDump) []ObjCMethodDump {
	sign := "-"
	if class {
		sign = "+"
	}
	for _, m := range list {
		out = append(out, ObjCMethodDump{Name: sign + "[" + cls + " " + m.Name + "]", Selector: m.Name, Class: class,
			Types: m.Types, Imp: hex(m.ImpVMAddr), Load: class && m.Name == "load"})
	}
	return out
}

func classesOf(f *macho.File, arch string) ClassesSliceDump {
	s := ClassesSliceDump{Arch: arch, Classes: []ObjCClassDump{}, Categories: []ObjCCategoryDump{}, SwiftTypes: []SwiftTypeDump{}}
	if f.Section("__DATA", "__objc_classlist") != nil || f.Section("__DATA_CONST", "__objc_classlist") != nil {
		nonLazy := map[uint64]bool{}
		guarded("__objc_nlclslist", &s.Errors, func() error {
			cs, err := f.GetObjCNonLazyClasses()
			for _, c := range cs {
				nonLazy[c.ClassPtr] = true
			}
			return err
		})
		guarded("__objc_classlist", &s.Errors, func() error {
			cs, err := f.GetObjCClasses()
			for _, c := range cs {
				cd := ObjCClassDump{Name: c.Name, Display: display(c.Name), Superclass: c.SuperClass, Address: hex(c.ClassPtr),
					Swift: c.IsSwiftLegacy || c.IsSwiftStable || swiftname.IsMangled(c.Name), NonLazy: nonLazy[c.ClassPtr]}
				cd.Methods = methods(c.Name, c.ClassMethods, true, []ObjCMethodDump{})
				cd.Methods = methods(c.Name, c.InstanceMethods, false, cd.Methods)
				s.Classes = append(s.Classes, cd)
			}
			return err
		})
	}
	if f.Section("__DATA", "__objc_catlist") != nil || f.Section("__DATA_CONST", "__objc_catlist") != nil {
		guarded("__objc_catlist", &s.Errors, func() error {
			cats, err := f.GetObjCCategories()
			for _, c := range cats {
				cls := ""
				if c.Class != nil {
					cls = c.Class.Name
				}
				cd := ObjCCategoryDump{Name: c.Name, Class: cls, Display: display(cls), Address: hex(c.VMAddr)}
				cd.Methods = methods(cls, c.ClassMethods, true, []ObjCMethodDump{})
				cd.Methods = methods(cls, c.InstanceMethods, false, cd.Methods)
				s.Categories = append(s.Categories, cd)
			}
			return err
		})
		guarded("__objc_nlcatlist", &s.Errors, func() error {
			cats, err := f.GetObjCNonLazyCategories()
			for _, c := range cats {
				for i := range s.Categories {
					if s.Categories[i].Address == hex(c.VMAddr) {
						s.Categories[i].NonLazy = true
					}
				}
			}
			return err
		})
	}
	if f.Section("__TEXT", "__swift5_types") != nil {
		guarded("__swift5_types", &s.Errors, func() error {
			ts, err := f.GetSwiftTypes()
			for _, t := range ts {
				s.SwiftTypes = append(s.SwiftTypes, swiftType(&t))
			}
			return err
		})
	}
	sort.SliceStable(s.Classes, func(i, j int) bool { return s.Classes[i].Name < s.Classes[j].Name })
	c := &s.Counts
	c.ObjCClasses = len(s.Classes)
	for _, cl := range s.Classes {
		if cl.Swift {
			c.SwiftObjC++
		}
		c.ObjCMethods += len(cl.Methods)
		for _, m := range cl.Methods {
			if m.Load {
				c.Load++
			}
		}
	}
	for _, cat := range s.Categories {
		c.CategoryMethods += len(cat.Methods)
		for _, m := range cat.Methods {
			if m.Load {
				c.Load++
			}
		}
	}
	c.SwiftTypes = len(s.SwiftTypes)
	for _, t := range s.SwiftTypes {
		if t.Kind == "class" {
			c.SwiftClasses++
		}
		if t.VTable != nil {
			for _, m := range t.VTable.Methods {
				c.VTableMethods++
				if m.Dynamic {
					c.DynamicMethods++
				}
				if m.Discriminator != 0 {
					c.PtrauthMethods++
				}
			}
		}
	}
	return s
}

// swiftTypeName is a type's name with the names of the contexts it is nested in.
func swiftTypeName(t *swift.Type) string {
	parts := []string{t.Name}
	for p, n := t.Parent, 0; p != nil && n < 64; p, n = p.Parent, n+1 {
		if p.Name != "" {
			parts = append(parts, p.Name)
		}
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".")
}

func swiftType(t *swift.Type) SwiftTypeDump {
	d := SwiftTypeDump{Kind: t.Kind.String(), Name: swiftTypeName(t), Address: hex(t.Address)}
	var c *swift.Class
	switch v := t.Type.(type) {
	case swift.Class:
		c = &v
	case *swift.Class:
		c = v
	}
	if c == nil {
		return d
	}
	d.Superclass = c.SuperclassName()
	if sd := swiftname.Demangle(d.Superclass); sd != d.Superclass {
		d.Superclass = sd // a mangled type reference (_$sSo8NSObjectC: __C.NSObject)
	}
	d.Overrides = len(c.MethodOverrides)
	if c.VTable != nil {
		vt := &SwiftVTableDump{Offset: c.VTable.VTableOffset, Size: c.VTable.VTableSize, Methods: []SwiftMethodDump{}}
		for i, m := range c.VTable.Methods {
			md := SwiftMethodDump{Slot: i, Kind: m.Flags.Kind().String(), Instance: m.Flags.IsInstance(), Dynamic: m.Flags.IsDynamic(),
				Async: m.Flags.IsAsync(), Discriminator: m.Flags.ExtraDiscriminator(), Symbol: m.Symbol}
			if m.Impl.RelOff != 0 && m.Address != 0 { // 0: no implementation in this image
				md.Impl = hex(m.Address)
			} else {
				md.Symbol = ""
			}
			vt.Methods = append(vt.Methods, md)
		}
		d.VTable = vt
	}
	return d
}

// hex writes an address as `machobind dump` does.
func hex(v uint64) string { return fmt.Sprintf("%#x", v) }
