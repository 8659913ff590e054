package objc

/*
#cgo linux LDFLAGS: -ldl
#include <stdlib.h>
#include "runtime.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Kind is which Objective-C runtime the process has.
type Kind int

// The runtimes.
const (
	None    Kind = C.MT_RT_NONE    // none loaded, or one whose internals are unknown
	GNU     Kind = C.MT_RT_GNU     // gcc's GNU runtime (libobjc.so.4): objc_msg_lookup
	Apple   Kind = C.MT_RT_APPLE   // Apple's objc4
	GNUstep Kind = C.MT_RT_GNUSTEP // GNUstep's libobjc2: objc_msgSend, modules through __objc_load
)

// Runtime reports which runtime this process has. It is settled the first time a runtime is
// found loaded; before that (none loaded yet) it is None and asked again next time.
func Runtime() Kind { return Kind(C.mt_objc_kind()) }

// Classes lists every class the runtime has registered (objc_getClassList); nil unless the
// runtime is GNU, Apple or GNUstep.
func Classes() []uintptr {
	n := int(C.mt_objc_class_list(nil, 0))
	if n == 0 {
		return nil
	}
	// words, not pointers, that C fills: cgo checks a pointer array handed to C word by word
	// for Go pointers (thousands of classes, before main), memory without pointers not at all
	buf := make([]uintptr, n+64)
	n = min(int(C.mt_objc_class_list((*unsafe.Pointer)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))), len(buf))
	return buf[:n:n]
}

// ImageClasses lists the classes an image defines, realizing only those (Apple:
// objc_copyClassNamesForImage; objc_getClassList realizes every class in the process first).
// Nil where the runtime cannot say (gcc's runtime).
func ImageClasses(image string) []uintptr {
	cs := C.CString(image)
	defer C.free(unsafe.Pointer(cs))
	for size := 256; ; {
		buf := make([]uintptr, size) // words, as in Classes
		n := int(C.mt_objc_image_classes(cs, (*unsafe.Pointer)(unsafe.Pointer(&buf[0])), C.size_t(len(buf))))
		if n <= len(buf) {
			return buf[:n:n]
		}
		size = n
	}
}

// SmallObjectClasses lists the classes libobjc2 has registered for small objects (receivers
// whose low bits, OBJC_SMALL_OBJECT_MASK, are a tag: objc_registerSmallObjectClass_np), by tag:
// out[tag] (0 where none is registered; out[0] always 0). Nil on other runtimes.
func SmallObjectClasses() []uintptr {
	mask := int(C.mt_objc_small_object_mask())
	if mask == 0 {
		return nil
	}
	buf := make([]uintptr, mask+1) // words, as in Classes
	C.mt_objc_small_object_classes((*unsafe.Pointer)(unsafe.Pointer(&buf[0])))
	return buf
}

// ClassName is the runtime's name of a class ("" for 0, or without a runtime).
func ClassName(cls uintptr) string {
	return C.GoString(C.mt_objc_class_name(*(*unsafe.Pointer)(unsafe.Pointer(&cls))))
}

// WithLock runs fn holding the runtime's own lock where there is one to take (gcc's runtime:
// __objc_runtime_mutex, recursive and owned by a thread; libobjc2: a recursive mutex of the
// library's in place of the runtime's hidden one; nothing on Apple's). Code that
// holds locks of its own while it sets IMPs takes the runtime's first: gcc's runtime sends
// +initialize with its lock held, and an +initialize that adds a method reaches a rebound
// class_addMethod (and so those locks) with it held.
func WithLock(fn func()) {
	runtime.LockOSThread() // the mutex is owned by the thread that took it
	defer runtime.UnlockOSThread()
	C.mt_objc_lock()
	defer C.mt_objc_unlock()
	fn()
}
