// Package selftest runs a small Objective-C-shaped workload through the real interposers inside
// a Go test process, with a test dispatcher standing in for the runtime, and names what it
// recorded. Only tests import it.
package selftest

/*
#cgo CFLAGS: -I${SRCDIR}/../.. -Wno-cast-function-type
#include "selftest.h"
*/
import "C"

import "unsafe"

// Run makes the traced calls: -[View layout] (two 2 and 3 ms -[View measure:] inside),
// +[View make], -[Button layout] calling [super layout], and -[Net fetch:] sleeping 5 ms on a
// thread named "worker". It returns the workload's checksum (14).
func Run() int { return int(C.selftest_run()) }

// UseNamer makes the recorder's drain name the selftest classes and selectors.
func UseNamer() { C.selftest_use_namer() }

// Namer names the selftest classes (selectors are C strings).
type Namer struct{}

func cls(p uintptr) *C.struct_st_class { return *(**C.struct_st_class)(unsafe.Pointer(&p)) }

// ObjectClass returns an object's class: its first word.
func (Namer) ObjectClass(obj uintptr) uintptr { return **(**uintptr)(unsafe.Pointer(&obj)) }

// Superclass returns a class's superclass.
func (Namer) Superclass(c uintptr) uintptr { return uintptr(unsafe.Pointer(cls(c).super)) }

// IsMetaClass reports whether c is a metaclass.
func (Namer) IsMetaClass(c uintptr) bool { return cls(c).meta != 0 }

// ClassName returns a class's name.
func (Namer) ClassName(c uintptr) string { return C.GoString(cls(c).name) }

// SelectorName returns a selector's name.
func (Namer) SelectorName(sel uintptr) string {
	return C.GoString(*(**C.char)(unsafe.Pointer(&sel)))
}
