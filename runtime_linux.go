//go:build linux

package msgtrace

/*
#cgo LDFLAGS: -ldl
#include "elfimages_linux.h"
*/
import "C"

import (
	"github.com/ebitengine/purego"
	"github.com/msgtrace/msgtrace/machobind"
)

// linuxRuntime is machobind.Runtime for this Linux process: its ELF objects through
// dl_iterate_phdr, page protections through mprotect and /proc/self/maps, unbound PLT slots
// through dlsym.
type linuxRuntime struct {
	machobind.ProcVM
}

// ELFRuntime returns the Runtime that rebinds the ELF objects of this process.
func ELFRuntime() machobind.Runtime { return linuxRuntime{} }

func (linuxRuntime) Images() ([]machobind.Loaded, error) {
	n := int(C.msgtrace_elf_objects(nil, 0))
	objs := make([]C.struct_mt_object, n+16)
	n = min(int(C.msgtrace_elf_objects(&objs[0], C.size_t(len(objs)))), len(objs))
	out := make([]machobind.Loaded, 0, n)
	for _, o := range objs[:n] {
		out = append(out, machobind.Loaded{Name: C.GoString(&o.name[0]), Header: uintptr(o.header), Slide: uintptr(o.slide), ELF: true})
	}
	return out, nil
}

func (linuxRuntime) Self() uintptr { return uintptr(C.msgtrace_elf_self()) }

// WatchImages: Linux has no add-image callback; objects loaded later are covered by
// rebinding dlopen (issue #6), so nothing is registered here.
func (linuxRuntime) WatchImages(func(machobind.Loaded)) error { return nil }

func (linuxRuntime) Resolve(symbol, _ string) (uintptr, error) {
	return purego.Dlsym(purego.RTLD_DEFAULT, symbol) // ELF names carry no leading underscore
}

func (linuxRuntime) Strip(p uintptr) uintptr { return p }

func (linuxRuntime) Sign(p, _ uintptr, _ machobind.AuthInfo) (uintptr, error) { return p, nil }
