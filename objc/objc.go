// Package objc names classes and selectors through an Objective-C runtime loaded with purego:
// Apple's (/usr/lib/libobjc.A.dylib) on darwin, GNU's (libobjc.so.4) or GNUstep's libobjc2 on
// Linux. No cgo, no link-time dependency: the runtime is opened by path.
package objc

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// DefaultPath is where this platform's Objective-C runtime lives.
func DefaultPath() string {
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return "/usr/lib/libobjc.A.dylib"
	}
	return "libobjc.so.4"
}

// Runtime is an opened Objective-C runtime.
type Runtime struct {
	handle         uintptr
	classGetName   func(cls uintptr) uintptr
	selGetName     func(sel uintptr) uintptr
	classIsMeta    func(cls uintptr) bool
	classSuper     func(cls uintptr) uintptr
	objectGetClass func(obj uintptr) uintptr // nil where it is a header inline (GNU)
	getClass       func(name string) uintptr
	registerName   func(name string) uintptr

	mu    sync.Mutex
	names map[[2]uintptr]string
}

// Open loads the runtime at path (a name the dynamic linker finds, or an absolute path).
func Open(path string) (*Runtime, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("opening the Objective-C runtime %s: %w", path, err)
	}
	return bind(h, path)
}

// Loaded returns the runtime this process already uses: the functions found in the global
// symbol scope (the program's own libobjc, GNUstep's, or a test runtime), without loading
// anything. It fails when no loaded object exports them.
func Loaded() (*Runtime, error) {
	if _, err := purego.Dlsym(purego.RTLD_DEFAULT, "class_getName"); err != nil {
		return nil, errors.New("no Objective-C runtime is loaded in this process (class_getName not found)")
	}
	return bind(purego.RTLD_DEFAULT, "the loaded Objective-C runtime")
}

// bind looks up the runtime's functions in handle h.
func bind(h uintptr, what string) (rt *Runtime, err error) {
	rt = &Runtime{handle: h, names: map[[2]uintptr]string{}}
	defer func() {
		if r := recover(); r != nil { // purego panics on a missing symbol
			err = fmt.Errorf("%s is not a usable Objective-C runtime: %v", what, r)
		}
	}()
	purego.RegisterLibFunc(&rt.classGetName, h, "class_getName")
	purego.RegisterLibFunc(&rt.selGetName, h, "sel_getName")
	purego.RegisterLibFunc(&rt.classIsMeta, h, "class_isMetaClass")
	purego.RegisterLibFunc(&rt.classSuper, h, "class_getSuperclass")
	purego.RegisterLibFunc(&rt.getClass, h, "objc_getClass")
	purego.RegisterLibFunc(&rt.registerName, h, "sel_registerName")
	if _, err := purego.Dlsym(h, "object_getClass"); err == nil {
		purego.RegisterLibFunc(&rt.objectGetClass, h, "object_getClass")
	}
	return rt, nil
}

func cString(p uintptr) string {
	if p == 0 {
		return ""
	}
	b := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	n := 0
	for *(*byte)(unsafe.Add(b, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(b), n))
}

// ClassName returns a class's name.
func (rt *Runtime) ClassName(cls uintptr) string { return cString(rt.classGetName(cls)) }

// SelectorName returns a selector's name.
func (rt *Runtime) SelectorName(sel uintptr) string { return cString(rt.selGetName(sel)) }

// IsMetaClass reports whether cls is a metaclass (its methods are class methods).
func (rt *Runtime) IsMetaClass(cls uintptr) bool { return rt.classIsMeta(cls) }

// Superclass returns a class's superclass (0 for a root class).
func (rt *Runtime) Superclass(cls uintptr) uintptr { return rt.classSuper(cls) }

// ObjectClass returns an object's class: object_getClass where the runtime exports it, else
// (GNU, where it is a header inline) the object's first word, its class pointer.
func (rt *Runtime) ObjectClass(obj uintptr) uintptr {
	if obj == 0 {
		return 0
	}
	if rt.objectGetClass != nil {
		return rt.objectGetClass(obj)
	}
	return **(**uintptr)(unsafe.Pointer(&obj))
}

// LookUpClass returns the class with a name, or 0.
func (rt *Runtime) LookUpClass(name string) uintptr { return rt.getClass(name) }

// Selector registers (or finds) a selector.
func (rt *Runtime) Selector(name string) uintptr { return rt.registerName(name) }

// ErrNilClass is returned for a zero class pointer.
var ErrNilClass = errors.New("nil class")

// MethodName names a call: "-[Class sel]" for an instance method (cls is the receiver's
// class), "+[Class sel]" for a class method (cls is a metaclass). For a super call, cls is the
// class the call was made from and the method ran in its superclass. Each distinct (class,
// selector, super) is named once.
func (rt *Runtime) MethodName(cls, sel uintptr, super bool) (string, error) {
	if cls == 0 {
		return "", ErrNilClass
	}
	key := [2]uintptr{cls, sel}
	if super {
		key[0] |= 1 // class pointers are aligned: the low bit marks the super variant
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if n, ok := rt.names[key]; ok {
		return n, nil
	}
	if super {
		if s := rt.classSuper(cls); s != 0 {
			cls = s
		}
	}
	sign := "-"
	if rt.classIsMeta(cls) {
		sign = "+"
	}
	n := sign + "[" + rt.ClassName(cls) + " " + rt.SelectorName(sel) + "]"
	rt.names[key] = n
	return n, nil
}
