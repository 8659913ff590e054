// Package swiftname turns the names Swift gives its classes and protocols in the Objective-C
// runtime into the names people write: _TtC11ApertureCLI4Once is ApertureCLI.Once,
// _TtCs12_SwiftObject is Swift._SwiftObject, _TtGC7SwiftUI29PresentationHostingControllerVS_7AnyView_
// is SwiftUI.PresentationHostingController<SwiftUI.AnyView>, _TtP4Shop8Delegate_ is
// Shop.Delegate.
//
// Two manglings reach the runtime. The compiler names a class or protocol that Objective-C sees
// in Swift's first ("old") mangling of a type, "_Tt" and the type (objc4 reads only its
// simplest form, copySwiftV1DemangledName); the Swift runtime names the instances of generic
// classes the same way (_TtG...), or, when the old mangling cannot say the type, in the stable
// mangling ("$s" and the type, ending "D"). Both are read here for the types such names hold:
// modules, nested classes, structs and enums, file-private types, generic arguments, protocol
// lists, tuples, functions and metatypes as arguments, the standard library's abbreviations.
//
// File-private types carry a discriminator (a hash of their file) that makes the name unique;
// it is shown as swift-demangle shows it, shortened to its first eight hex digits:
// _TtCV7DSStore7DSStoreP33_81859975D46C1BDFDC2AA01284D3574024DiagnosticHandlerStorage is
// DSStore.DSStore.(DiagnosticHandlerStorage in _81859975). A local type is (Name #1).
//
// Anything else, malformed or unknown, is returned unchanged; no input panics.
package swiftname

import (
	"strconv"
	"strings"
)

// maxDepth bounds the nesting the parsers follow, so that no input recurses without end.
const maxDepth = 64

// discriminatorDigits is how much of a file-private discriminator is shown.
const discriminatorDigits = 8

// IsMangled reports whether name has the shape of a Swift runtime name ("_Tt" or "$s" /
// "_$s"), which Demangle may read. Cheap: a prefix test.
func IsMangled(name string) bool {
	return strings.HasPrefix(name, "_Tt") || strings.HasPrefix(name, "$s") || strings.HasPrefix(name, "_$s")
}

// Demangle returns the readable form of a Swift runtime class or protocol name, or name itself
// when it is not one or cannot be read.
func Demangle(name string) string {
	if s, ok := Parse(name); ok {
		return s
	}
	return name
}

// Parse returns the readable form of a Swift runtime class or protocol name and true, or "" and
// false when name is not one or cannot be read.
func Parse(name string) (string, bool) {
	var n *node
	switch {
	case strings.HasPrefix(name, "_Tt"):
		p := oldParser{s: name, i: 3}
		n = p.runtimeName()
		if n == nil || p.i != len(p.s) {
			return "", false
		}
	case strings.HasPrefix(name, "$s"), strings.HasPrefix(name, "_$s"):
		n = parseNew(strings.TrimPrefix(name, "_")[2:])
		if n == nil {
			return "", false
		}
	default:
		return "", false
	}
	var b strings.Builder
	if !n.print(&b, 0) {
		return "", false
	}
	return b.String(), true
}

// Method returns a method name "-[Class selector]" or "+[Class selector]" with its class
// demangled, or name itself when its class is not a Swift runtime name.
func Method(name string) string {
	if len(name) < 6 || name[1] != '[' || name[len(name)-1] != ']' || (name[0] != '-' && name[0] != '+') {
		return name
	}
	if name[2] != '_' && name[2] != '$' {
		return name // no allocation or search for the common case
	}
	sp := strings.IndexByte(name, ' ')
	if sp < 0 {
		return name
	}
	cls, ok := Parse(name[2:sp])
	if !ok {
		return name
	}
	return name[:2] + cls + name[sp:]
}

// kind is what a node stands for.
type kind uint8

const (
	kModule     kind = iota // text
	kNominal                // kids[0] context, text name (or kids[1] a private/local name)
	kPrivate                // text name, disc discriminator
	kLocal                  // text name, num index
	kBound                  // kids[0] nominal, kids[1:] arguments
	kProtoList              // kids: protocols (empty: Any)
	kTuple                  // kids: elements (labels in labels)
	kFunction               // kids[0] argument type, kids[1] result; text "throws" when it throws
	kMetatype               // kids[0]
	kExMetatype             // kids[0] existential metatype (P.Type)
	kText                   // text as it is (builtin names, generic parameters)
	kInOut                  // kids[0]
	kOptional               // kids[0], Sg in the stable mangling: printed Swift.Optional<T>
	kFunc                   // a function as a context: kids[0] context, text name (or name), labels
)

// node is one piece of a demangled type.
type node struct {
	k      kind
	text   string
	disc   string
	num    int
	kids   []*node
	labels []string
	name   *node // kNominal: a kPrivate or kLocal name instead of text
	nomK   byte  // kNominal: 'C', 'V', 'O', 'P', 'a' (type alias)
}

// print writes the node as Swift source spells the type; false if it cannot.
func (n *node) print(b *strings.Builder, depth int) bool {
	if n == nil || depth > maxDepth {
		return false
	}
	switch n.k {
	case kModule:
		b.WriteString(n.text)
	case kNominal:
		if len(n.kids) != 1 || !n.kids[0].print(b, depth+1) {
			return false
		}
		b.WriteByte('.')
		if n.name != nil {
			return n.name.print(b, depth+1)
		}
		b.WriteString(n.text)
	case kFunc:
		if len(n.kids) != 1 || !n.kids[0].print(b, depth+1) {
			return false
		}
		b.WriteByte('.')
		if n.name != nil {
			if !n.name.print(b, depth+1) {
				return false
			}
		} else {
			b.WriteString(n.text)
		}
		b.WriteByte('(')
		for _, l := range n.labels {
			b.WriteString(l + ":")
		}
		b.WriteByte(')')
	case kPrivate:
		d := strings.TrimPrefix(n.disc, "_")
		if len(d) > discriminatorDigits {
			d = d[:discriminatorDigits]
		}
		b.WriteString("(" + n.text + " in _" + d + ")")
	case kLocal:
		b.WriteString("(" + n.text + " #" + strconv.Itoa(n.num+1) + ")")
	case kBound:
		if len(n.kids) < 1 || !n.kids[0].print(b, depth+1) {
			return false
		}
		if len(n.kids) > 1 {
			b.WriteByte('<')
			for i, a := range n.kids[1:] {
				if i > 0 {
					b.WriteString(", ")
				}
				if !a.print(b, depth+1) {
					return false
				}
			}
			b.WriteByte('>')
		}
	case kProtoList:
		if len(n.kids) == 0 {
			b.WriteString("Any")
		}
		for i, p := range n.kids {
			if i > 0 {
				b.WriteString(" & ")
			}
			if !p.print(b, depth+1) {
				return false
			}
		}
	case kTuple:
		b.WriteByte('(')
		for i, e := range n.kids {
			if i > 0 {
				b.WriteString(", ")
			}
			if i < len(n.labels) && n.labels[i] != "" {
				b.WriteString(n.labels[i] + ": ")
			}
			if !e.print(b, depth+1) {
				return false
			}
		}
		b.WriteByte(')')
	case kFunction:
		if len(n.kids) != 2 {
			return false
		}
		arg := n.kids[0]
		if arg.k != kTuple {
			b.WriteByte('(')
		}
		if !arg.print(b, depth+1) {
			return false
		}
		if arg.k != kTuple {
			b.WriteByte(')')
		}
		if n.text != "" {
			b.WriteString(" " + n.text)
		}
		b.WriteString(" -> ")
		return n.kids[1].print(b, depth+1)
	case kMetatype, kExMetatype:
		if len(n.kids) != 1 {
			return false
		}
		k := n.kids[0]
		paren := k.k == kFunction || k.k == kProtoList && len(k.kids) > 1
		if paren {
			b.WriteByte('(')
		}
		if !k.print(b, depth+1) {
			return false
		}
		if paren {
			b.WriteByte(')')
		}
		if n.k == kExMetatype {
			b.WriteString(".Type")
		} else if k.k == kProtoList {
			b.WriteString(".Protocol")
		} else {
			b.WriteString(".Type")
		}
	case kInOut:
		b.WriteString("inout ")
		return len(n.kids) == 1 && n.kids[0].print(b, depth+1)
	case kOptional:
		b.WriteString("Swift.Optional<")
		if len(n.kids) != 1 || !n.kids[0].print(b, depth+1) {
			return false
		}
		b.WriteByte('>')
	case kText:
		b.WriteString(n.text)
	default:
		return false
	}
	return true
}

var swiftModule = &node{k: kModule, text: "Swift"}

func swiftType(k byte, name string) *node {
	return &node{k: kNominal, nomK: k, text: name, kids: []*node{swiftModule}}
}

// isNominal reports whether n names a class, struct, enum or protocol (or a type alias).
func (n *node) isNominal() bool { return n != nil && n.k == kNominal }
