package msgtrace

/*
#cgo linux LDFLAGS: -ldl
#include <stdlib.h>
#include "methods.h"
#include "trampoline.h"
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/msgtrace/msgtrace/machobind"
	"github.com/msgtrace/msgtrace/objc"
)

// MethodRuntime is the Objective-C runtime methods can be instrumented in.
type MethodRuntime = objc.Kind

// The runtimes method capture knows.
const (
	RuntimeNone    = objc.None    // none loaded, or one whose internals we do not know
	RuntimeGNU     = objc.GNU     // gcc's GNU runtime (libobjc.so.4): objc_msg_lookup
	RuntimeApple   = objc.Apple   // Apple's objc4
	RuntimeGNUstep = objc.GNUstep // GNUstep's libobjc2: objc_msgSend, modules through __objc_load
)

// TrampolinePool is how many methods can be instrumented in one process: the trampolines are
// assembled into the library, never generated. Methods past it stay untraced and are counted
// (MethodStats.Full).
const TrampolinePool = C.MT_POOL

// MethodStats counts what an install (or a restore) did.
type MethodStats struct {
	Classes      int // classes visited, each with its metaclass
	Instrumented int // methods now calling through a trampoline (restore: given back)
	Never        int // left alone: the never-instrument list and forwarding IMPs
	Full         int // left untraced because the pool was used up
	Foreign      int // left alone: unknown method layout (install), IMP no longer ours (restore)
	PoolUsed     int // trampolines handed out so far in this process
}

func (s *MethodStats) add(c C.struct_mt_methods_stats) {
	s.Classes += int(c.classes)
	s.Instrumented += int(c.instrumented)
	s.Never += int(c.never)
	s.Full += int(c.full)
	s.Foreign += int(c.foreign)
	s.PoolUsed = int(c.pool_used)
}

// statsOf runs a C function that fills a struct mt_methods_stats and returns what it counted.
func statsOf(f func(*C.struct_mt_methods_stats)) MethodStats {
	var c C.struct_mt_methods_stats
	f(&c)
	var st MethodStats
	st.add(c)
	return st
}

// cPointers copies ps into memory of C's (the C side keeps no Go pointer); the caller frees it.
func cPointers(ps []uintptr) unsafe.Pointer {
	buf := C.malloc(C.size_t(len(ps)+1) * C.size_t(unsafe.Sizeof(uintptr(0))))
	copy(unsafe.Slice((*uintptr)(buf), len(ps)), ps)
	return buf
}

// methodsMu serializes installs, restores and module callbacks.
var methodsMu sync.Mutex

// MethodsRuntime reports which runtime this process has (objc.Runtime).
func MethodsRuntime() MethodRuntime { return objc.Runtime() }

// Classes lists every class the runtime has registered (objc.Classes).
func Classes() []uintptr { return objc.Classes() }

// ImageClasses lists the classes an image defines, realizing only those (objc.ImageClasses).
func ImageClasses(image string) []uintptr { return objc.ImageClasses(image) }

// SmallObjectClasses lists libobjc2's small-object classes by tag (objc.SmallObjectClasses).
func SmallObjectClasses() []uintptr { return objc.SmallObjectClasses() }

// ClassName is the runtime's name of a class (objc.ClassName).
func ClassName(cls uintptr) string { return objc.ClassName(cls) }

// ImageOf is the path of the loaded object that holds an address ("" when none does; the main
// program may be reported by its path or as "").
func ImageOf(p uintptr) string {
	return C.GoString(C.msgtrace_image_of(*(*unsafe.Pointer)(unsafe.Pointer(&p))))
}

// createdBy maps classes created at run time, registered since install, to the path of the
// object whose code registered them.
var createdBy sync.Map

// ClassImage is the path of the loaded object a class belongs to: the one that defines it; for
// a class created at run time, the one whose code registered it (seen by the rebound
// objc_registerClassPair: KVO's NSKVONotifying_* belong to Foundation, an app's own dynamic
// classes to the app), else that of its nearest superclass an object defines.
func ClassImage(cls uintptr) string {
	if v, ok := createdBy.Load(cls); ok {
		return v.(string)
	}
	return C.GoString(C.msgtrace_class_image(*(*unsafe.Pointer)(unsafe.Pointer(&cls))))
}

// ClassImages is ClassImage of each class, the loaded objects' segments read once for all of
// them.
func ClassImages(classes []uintptr) []string {
	out := make([]string, len(classes))
	if len(classes) == 0 {
		return out
	}
	var missing []int // not created at run time since install: asked of the segments
	for i, c := range classes {
		if v, ok := createdBy.Load(c); ok {
			out[i] = v.(string)
		} else {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return out
	}
	cs := make([]uintptr, len(missing))
	for k, i := range missing {
		cs[k] = classes[i]
	}
	buf := cPointers(cs)
	defer C.free(buf)
	names := C.malloc(C.size_t(len(cs)) * C.size_t(unsafe.Sizeof(uintptr(0)))) // each class's image's name
	defer C.free(names)
	C.msgtrace_class_images((*unsafe.Pointer)(buf), C.size_t(len(missing)), (**C.char)(names))
	ns := unsafe.Slice((**C.char)(names), len(missing))
	seen := map[*C.char]string{} // a few objects' paths for hundreds of classes
	for k, i := range missing {
		p, ok := seen[ns[k]]
		if !ok {
			p = C.GoString(ns[k])
			seen[ns[k]] = p
		}
		out[i] = p
	}
	return out
}

// InSharedCache reports whether an image path is in dyld's shared cache (always false off
// Apple platforms).
func InSharedCache(path string) bool {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	return C.msgtrace_in_shared_cache(cs) != 0
}

// NeverInstrumented reports whether a selector is on the list of methods never given a
// trampoline (lifecycle, the runtime's fast paths, forwarding and resolution).
func NeverInstrumented(sel string) bool {
	cs := C.CString(sel)
	defer C.free(unsafe.Pointer(cs))
	return C.msgtrace_never_instrument(cs) != 0
}

// WithRuntimeLock runs fn holding the Objective-C runtime's own lock where the library can
// take it (objc.WithLock). Callers that hold locks of their own while instrumenting take the
// runtime's first.
func WithRuntimeLock(fn func()) { objc.WithLock(fn) }

// InstallMethods puts a trampoline into every method each class and its metaclass define,
// but those never instrumented and those already ours. Each trampoline's data is published
// before the IMP that leads to it.
func InstallMethods(classes []uintptr) MethodStats {
	methodsMu.Lock()
	defer methodsMu.Unlock()
	return installMethods(classes)
}

func installMethods(classes []uintptr) MethodStats {
	buf := cPointers(classes)
	defer C.free(buf)
	return statsOf(func(c *C.struct_mt_methods_stats) {
		C.msgtrace_methods_install((*unsafe.Pointer)(buf), C.size_t(len(classes)), c)
	})
}

// InstallImageCategories instruments the methods the categories of a loaded image (header: its
// mach header) add to their classes, whatever image the class belongs to: an app's category on
// a class of the system, whose class a selection by image leaves out, and the category's +load
// (Apple platforms: from the image's compiled category list; nothing elsewhere, where gcc's
// runtime reports each module's categories instead).
func InstallImageCategories(header uintptr) MethodStats {
	methodsMu.Lock()
	defer methodsMu.Unlock()
	return statsOf(func(c *C.struct_mt_methods_stats) {
		C.msgtrace_image_categories_install(*(*unsafe.Pointer)(unsafe.Pointer(&header)), c)
	})
}

// EndEarlyMethods ends the early modules' instrumenting (gcc's runtime, MSGTRACE_METHODS=all
// started by the preload loader at the first module a library registered: every module was
// instrumented in C as it arrived, before the Go runtime was up) and returns what it
// instrumented. Modules arriving later go to WatchArrivingModules' callback. Called once the
// selection is chosen, or when tracing gives up.
func EndEarlyMethods() MethodStats {
	return statsOf(func(c *C.struct_mt_methods_stats) { C.msgtrace_early_methods_end(c) })
}

// AddedMethods is what the rebound class_addMethod instrumented so far on gcc's runtime: the
// methods a program added to selected classes, each given its trampoline as it was added (no
// call into Go, no dispatch-table refresh of ours: most are added inside a +initialize, under
// the runtime's lock). Zero elsewhere.
func AddedMethods() MethodStats {
	return statsOf(func(c *C.struct_mt_methods_stats) { C.msgtrace_added_methods(c) })
}

// UnseenClasses keeps, of classes, those it has not been given before and those given methods
// since it last was (gcc's runtime: the runtime links a category's method list, or an added
// method's, in front of a class's lists, so an unchanged first list is a class given no
// method), and remembers the others as they are now; elsewhere it keeps them all. For the
// passes over every class after an object is loaded: the classes already looked at are
// skipped, not looked at method by method again.
func UnseenClasses(classes []uintptr) []uintptr {
	if len(classes) == 0 {
		return classes
	}
	buf := cPointers(classes)
	defer C.free(buf)
	n := int(C.msgtrace_classes_unseen((*unsafe.Pointer)(buf), C.size_t(len(classes))))
	return append([]uintptr(nil), unsafe.Slice((*uintptr)(buf), n)...)
}

// RestoreMethods gives every instrumented method its original IMP back where the IMP is still
// a trampoline of ours (the app may have swizzled since). Trampolines are never freed: code
// that cached one keeps calling the original through it, untraced once tracing stops.
func RestoreMethods() MethodStats {
	methodsMu.Lock()
	defer methodsMu.Unlock()
	return statsOf(func(c *C.struct_mt_methods_stats) { C.msgtrace_methods_restore(c) })
}

// moduleHook is called with the classes of each module the GNU runtime registers later;
// categoryHook with the module itself.
var (
	moduleHook   atomic.Pointer[func([]uintptr)]
	categoryHook atomic.Pointer[func(Module)]
)

// Module is an object's module registered by gcc's runtime (__objc_exec_class) or libobjc2
// (__objc_load), as seen after the runtime registered it.
type Module struct {
	ptr        unsafe.Pointer
	Image      string   // the object that holds it
	Categories []string // the classes its categories extend, in order
}

// InstallCategory instruments the methods category i of the module adds, whatever image its
// class belongs to (an app's category on a Foundation class).
func (m Module) InstallCategory(i int) MethodStats {
	methodsMu.Lock()
	defer methodsMu.Unlock()
	return statsOf(func(c *C.struct_mt_methods_stats) { C.msgtrace_module_category_install(m.ptr, C.size_t(i), c) })
}

// WatchModules calls fn with each module gcc's runtime or libobjc2 registers later, after the
// classes its ModuleRebindings callback got (once the rebindings are in place).
func WatchModules(fn func(Module)) { categoryHook.Store(&fn) }

// ModuleRebindings are the rebindings that report classes registered after install, and
// methods added to registered classes: on gcc's runtime and libobjc2, classes register from
// module constructors (__objc_exec_class, __objc_load), which may run after ours (the main
// program's always do); on every runtime, classes created at run time register with
// objc_registerClassPair (KVO's NSKVONotifying_* among them) and get methods with
// class_addMethod, before or after. fn gets each module's classes and the classes its
// categories extend, or the new class, or the class a method was added to, after the runtime
// registered them. Nil where no runtime we instrument is loaded.
func ModuleRebindings(fn func(classes []uintptr)) []machobind.Rebinding {
	rt := MethodsRuntime()
	if rt != RuntimeGNU && rt != RuntimeApple && rt != RuntimeGNUstep {
		return nil
	}
	moduleHook.Store(&fn)
	rs := []machobind.Rebinding{
		{Name: "objc_registerClassPair", Replacement: uintptr(unsafe.Pointer(C.msgtrace_objc_registerClassPair)),
			Publish: func(orig uintptr) {
				*(*uintptr)(unsafe.Pointer(&C.msgtrace_orig_objc_registerClassPair)) = orig
			}},
		{Name: "class_addMethod", Replacement: uintptr(unsafe.Pointer(C.msgtrace_class_addMethod)),
			Publish: func(orig uintptr) {
				*(*uintptr)(unsafe.Pointer(&C.msgtrace_orig_class_addMethod)) = orig
			}},
	}
	if rt == RuntimeGNU || rt == RuntimeGNUstep {
		// from now on every module registration calls back (modules registered before went
		// through the interposer untouched, as the Go runtime may not have been up)
		C.msgtrace_watch_modules(1)
	}
	// gcc's runtime: where the objects bind __objc_exec_class to this library's (preloaded) or
	// the preload loader's, every module comes through it, those of objects dlopened later
	// included; else the slots are rebound
	if rt == RuntimeGNU && C.msgtrace_exec_class_interposed() == 0 {
		rs = append(rs, machobind.Rebinding{Name: "__objc_exec_class", Replacement: uintptr(unsafe.Pointer(C.msgtrace___objc_exec_class)),
			Publish: func(orig uintptr) {
				*(*uintptr)(unsafe.Pointer(&C.msgtrace_orig___objc_exec_class)) = orig
			}})
	}
	if rt == RuntimeGNUstep && C.msgtrace_exec_class_interposed() == 0 {
		rs = append(rs, machobind.Rebinding{Name: "__objc_load", Replacement: uintptr(unsafe.Pointer(C.msgtrace___objc_load)),
			Publish: func(orig uintptr) {
				*(*uintptr)(unsafe.Pointer(&C.msgtrace_orig___objc_load)) = orig
			}})
	}
	return rs
}

// imagesHook is called after images were loaded (Apple, objc_addLoadImageFunc).
var imagesHook atomic.Pointer[func()]

// WatchLoadedImages calls fn, on a thread of the library's, after the Objective-C runtime read
// the classes and categories of images loaded later (Apple: objc_addLoadImageFunc, macOS 10.15
// and iOS 13 on; its callback holds the runtime lock, so the work is deferred to that thread,
// and calls into a new image made before fn ran are not traced: its +load methods, as a rule,
// which the runtime reads right after it lets go of the lock). It reports false where the
// runtime has no such callback: the caller watches dyld or dlopen instead.
func WatchLoadedImages(fn func()) bool {
	imagesHook.Store(&fn)
	return C.msgtrace_watch_loaded_images() != 0
}

//export msgtraceImagesLoaded
func msgtraceImagesLoaded() {
	if fn := imagesHook.Load(); fn != nil {
		(*fn)()
	}
}

// msgtraceClassRegistered is called by the rebound objc_registerClassPair after the original,
// with the address its caller returns to, and by the rebound class_addMethod (creator nil).
//
//export msgtraceClassRegistered
func msgtraceClassRegistered(cls, creator unsafe.Pointer) {
	if creator != nil && cls != nil {
		createdBy.Store(uintptr(cls), C.GoString(C.msgtrace_image_of(creator)))
	}
	if fn := moduleHook.Load(); fn != nil && cls != nil {
		(*fn)([]uintptr{uintptr(cls)})
	}
}

// ArrivingModule is a module gcc's runtime or libobjc2 is about to register (__objc_exec_class,
// __objc_load, called by the constructor of the object that holds it), as the compiler emitted
// it: the runtime sends the +load methods of its classes and categories while it registers it,
// so only methods given trampolines now have those calls traced.
type ArrivingModule struct {
	ptr     unsafe.Pointer
	Image   string   // the object that holds it
	Names   []string // the classes it defines, then the classes its categories extend
	Classes int      // how many of Names are classes it defines
}

// InstallStatic gives the methods of the classes and categories selected (selected[i] for
// Names[i]) trampolines in their compiled method lists: +load among them (it keeps its
// trampoline: the runtime knows a +load it sent by its IMP, so no restore gives it back). A
// category whose class is not registered yet is left to the install after registration.
func (m ArrivingModule) InstallStatic(selected []bool) MethodStats {
	methodsMu.Lock()
	defer methodsMu.Unlock()
	if len(selected) == 0 {
		return MethodStats{}
	}
	mask := C.malloc(C.size_t(len(selected)))
	defer C.free(mask)
	b := unsafe.Slice((*byte)(mask), len(selected))
	for i, s := range selected {
		b[i] = 0
		if s {
			b[i] = 1
		}
	}
	return statsOf(func(c *C.struct_mt_methods_stats) {
		C.msgtrace_module_install_static(m.ptr, (*C.uchar)(mask), C.size_t(len(selected)), c)
	})
}

// arrivingHook is called with each module before gcc's runtime registers it.
var arrivingHook atomic.Pointer[func(ArrivingModule)]

// WatchArrivingModules calls fn with each module gcc's runtime or libobjc2 is about to register, from
// the time ModuleRebindings returns: in the thread that registers it (a module constructor:
// inside dlopen for an object loaded later, with the loader's lock held; inside a +load that
// loads a plugin, with the runtime's lock held too).
func WatchArrivingModules(fn func(ArrivingModule)) { arrivingHook.Store(&fn) }

// msgtraceModuleArriving is called before the runtime's __objc_exec_class.
//
//export msgtraceModuleArriving
func msgtraceModuleArriving(module unsafe.Pointer) {
	fn := arrivingHook.Load()
	if fn == nil {
		return
	}
	var names [1024]*C.char
	var ncls C.size_t
	// &names as a pointer to its first element, not &names[0]: cgo checks the whole array of
	// the latter for Go pointers on every call (1,024 of them, ~23,000 instructions a module
	// on the thread registering it); C fills it, nothing of Go's is in it
	n := min(int(C.msgtrace_module_defs(module, (**C.char)(unsafe.Pointer(&names)), C.size_t(len(names)), &ncls)), len(names))
	if n == 0 {
		return
	}
	m := ArrivingModule{ptr: module, Image: C.GoString(C.msgtrace_image_of(module)), Classes: min(int(ncls), n)}
	for _, c := range names[:n] {
		m.Names = append(m.Names, C.GoString(c))
	}
	(*fn)(m)
}

// msgtraceModuleLoaded is called after the runtime's __objc_exec_class returned.
//
//export msgtraceModuleLoaded
func msgtraceModuleLoaded(module unsafe.Pointer) {
	fn := moduleHook.Load()
	if fn == nil {
		return
	}
	var buf [1024]unsafe.Pointer
	n := int(C.msgtrace_module_classes(module, (*unsafe.Pointer)(unsafe.Pointer(&buf)), C.size_t(len(buf)))) // not &buf[0]: as names above
	if n > 0 {
		cls := make([]uintptr, n)
		for i := range cls {
			cls[i] = uintptr(buf[i])
		}
		(*fn)(cls)
	}
	if cf := categoryHook.Load(); cf != nil {
		var names [1024]*C.char
		k := min(int(C.msgtrace_module_categories(module, (**C.char)(unsafe.Pointer(&names)), C.size_t(len(names)))), len(names))
		if k == 0 {
			return
		}
		m := Module{ptr: module, Image: C.GoString(C.msgtrace_image_of(module))}
		for _, c := range names[:k] {
			m.Categories = append(m.Categories, C.GoString(c))
		}
		(*cf)(m)
	}
}
