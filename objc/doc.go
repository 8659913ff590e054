// Package objc is the library's one binding to the Objective-C runtime of the traced process:
// Apple's objc4, gcc's GNU libobjc (libobjc.so.4) or GNUstep's libobjc2. It finds the runtime
// in the process (dlsym: the library never links against one), says which it is, names
// classes and selectors, lists classes and methods, gets and sets IMPs (refreshing gcc's
// dispatch tables), lists libobjc2's small-object classes, and takes the runtime's lock for
// installs. Method capture (methods*.c) and
// the drain's namer (drain_names.c) use it; nothing else looks runtime functions up.
//
// # What is C and why
//
// The binding is C (runtime.c, runtime.h, ptrmap.h), compiled into the library by cgo and
// called directly by the library's C, because its callers run where Go cannot:
//
//   - method capture sets IMPs with gcc's __objc_runtime_mutex held, from the rebound
//     __objc_exec_class, objc_registerClassPair and class_addMethod, which run inside module
//     constructors (before the Go runtime is up, or under the dynamic loader's lock) and inside
//     +initialize with the runtime's lock held;
//   - Apple's objc_addLoadImageFunc callback runs with the runtime's lock held;
//   - the drain names methods on its own C thread, which must never wait for Go (a thread
//     holding gcc's lock may be waiting for a chunk only the drain can free), and reads
//     selector names from a lock-free table capture fills (mt_objc_remember_sel_name).
//
// The runtime's functions are looked up once, into one table, the first time a runtime is
// found loaded (asked before one is, the answer is "none" and the lookup is tried again).
// Every C name is hidden from the library's dynamic symbol table. (The preload loader,
// cmd/libmsgtrace/loader, is a separate small object built without the library: it finds the
// runtime's __objc_exec_class itself.)
//
// # What is Go
//
// This package's Go functions are a thin face over the same C for the Go side of the
// library: which runtime it is (Runtime), the classes to instrument (Classes, ImageClasses),
// their names for the selection (ClassName), and the install-time lock (WithLock). They run on
// ordinary Go threads, outside any runtime callback.
package objc
