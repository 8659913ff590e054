//go:build darwin

package machobind

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// dyldRuntime is the Runtime of a darwin process: dyld's image list and add-image callback,
// Mach VM calls for page protections, dlsym for unbound lazy symbols. Everything is called
// through purego, so the package needs no SDK headers to build.
type dyldRuntime struct {
	imageCount     func() uint32
	imageHeader    func(i uint32) uintptr
	imageSlide     func(i uint32) uintptr
	imageName      func(i uint32) uintptr
	registerAdd    func(cb uintptr)
	dladdr         func(addr uintptr, info *dlInfo) int32
	vmProtect      func(task uint32, addr, size uint64, setMax int32, prot int32) int32
	vmRegion       func(task uint32, addr *uint64, size *uint64, flavor int32, info unsafe.Pointer, count *uint32, object *uint32) int32
	task           uint32
	once           sync.Once
	mu             sync.Mutex
	onAdd          []func(Loaded) // every watcher, in the order they came
	headerToLoaded sync.Map
}

type dlInfo struct {
	fname, fbase, sname, saddr uintptr
}

const (
	vmProtCopy            = 0x10
	vmRegionBasicInfo64   = 9
	vmRegionBasicInfoSize = 9 // natural_t words in vm_region_basic_info_data_64_t
	kernSuccess           = 0
)

var (
	darwinRT     *dyldRuntime
	darwinRTErr  error
	darwinRTOnce sync.Once
)

// DefaultRuntime returns the Runtime of this process.
func DefaultRuntime() (Runtime, error) {
	darwinRTOnce.Do(func() { darwinRT, darwinRTErr = newDyldRuntime() })
	return darwinRT, darwinRTErr
}

func newDyldRuntime() (rt *dyldRuntime, err error) {
	defer func() {
		if r := recover(); r != nil { // purego panics when a symbol is missing
			err = fmt.Errorf("binding dyld functions: %v", r)
		}
	}()
	lib, err := purego.Dlopen("/usr/lib/libSystem.B.dylib", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, err
	}
	rt = &dyldRuntime{}
	purego.RegisterLibFunc(&rt.imageCount, lib, "_dyld_image_count")
	purego.RegisterLibFunc(&rt.imageHeader, lib, "_dyld_get_image_header")
	purego.RegisterLibFunc(&rt.imageSlide, lib, "_dyld_get_image_vmaddr_slide")
	purego.RegisterLibFunc(&rt.imageName, lib, "_dyld_get_image_name")
	purego.RegisterLibFunc(&rt.registerAdd, lib, "_dyld_register_func_for_add_image")
	purego.RegisterLibFunc(&rt.dladdr, lib, "dladdr")
	purego.RegisterLibFunc(&rt.vmProtect, lib, "mach_vm_protect")
	purego.RegisterLibFunc(&rt.vmRegion, lib, "mach_vm_region")
	taskSym, err := purego.Dlsym(lib, "mach_task_self_")
	if err != nil {
		return nil, err
	}
	rt.task = *(*uint32)(ptr(taskSym))
	return rt, nil
}

func goString(p uintptr) string {
	if p == 0 {
		return ""
	}
	var b strings.Builder
	for i := uintptr(0); ; i++ {
		c := *(*byte)(ptr(p + i))
		if c == 0 {
			return b.String()
		}
		b.WriteByte(c)
	}
}

func (rt *dyldRuntime) Images() ([]Loaded, error) {
	n := rt.imageCount()
	out := make([]Loaded, 0, n)
	for i := uint32(0); i < n; i++ {
		h := rt.imageHeader(i)
		if h == 0 {
			continue // unloaded while we looked
		}
		out = append(out, Loaded{Name: goString(rt.imageName(i)), Header: h, Slide: rt.imageSlide(i)})
	}
	return out, nil
}

func (rt *dyldRuntime) Self() uintptr {
	var info dlInfo
	if rt.dladdr(reflect.ValueOf(DefaultRuntime).Pointer(), &info) == 0 {
		return 0
	}
	return info.fbase
}

// WatchImages calls fn for every image dyld adds from now on, and (as dyld does when a
// callback registers) for those already loaded. Each watcher is called; dyld gets one callback.
func (rt *dyldRuntime) WatchImages(fn func(Loaded)) error {
	rt.mu.Lock()
	rt.onAdd = append(rt.onAdd, fn)
	later := len(rt.onAdd) > 1
	rt.mu.Unlock()
	if later { // dyld reports the images already loaded to a new callback only: do it here
		imgs, err := rt.Images()
		if err != nil {
			return err
		}
		for _, l := range imgs {
			fn(l)
		}
	}
	rt.once.Do(func() {
		cb := purego.NewCallback(func(header, slide uintptr) uintptr {
			var info dlInfo
			name := ""
			if rt.dladdr(header, &info) != 0 {
				name = goString(info.fname)
			}
			rt.mu.Lock()
			fns := slices.Clone(rt.onAdd)
			rt.mu.Unlock()
			for _, f := range fns {
				f(Loaded{Name: name, Header: header, Slide: slide})
			}
			return 0
		})
		rt.registerAdd(cb)
	})
	return nil
}

func (rt *dyldRuntime) PageSize() uintptr { return uintptr(os.Getpagesize()) }

func (rt *dyldRuntime) Protection(addr uintptr) (Prot, error) {
	a, size := uint64(addr), uint64(0)
	var info [vmRegionBasicInfoSize]uint32
	count, object := uint32(vmRegionBasicInfoSize), uint32(0)
	if kr := rt.vmRegion(rt.task, &a, &size, vmRegionBasicInfo64, unsafe.Pointer(&info[0]), &count, &object); kr != kernSuccess {
		return 0, fmt.Errorf("mach_vm_region(%#x): kern_return %d", addr, kr)
	}
	if a > uint64(addr) {
		return 0, fmt.Errorf("address %#x is not mapped", addr)
	}
	return Prot(info[0] & 7), nil // vm_region_basic_info_64.protection
}

func (rt *dyldRuntime) Protect(addr, size uintptr, p Prot) error {
	prot := int32(p)
	if p&ProtWrite != 0 {
		prot |= vmProtCopy // __DATA_CONST is mapped copy-on-write from the file or the shared cache
	}
	if kr := rt.vmProtect(rt.task, uint64(addr), uint64(size), 0, prot); kr != kernSuccess {
		return fmt.Errorf("mach_vm_protect(%#x, %#x, %v): kern_return %d", addr, size, p, kr)
	}
	return nil
}

func (rt *dyldRuntime) Resolve(symbol, _ string) (uintptr, error) {
	return purego.Dlsym(purego.RTLD_DEFAULT, strings.TrimPrefix(symbol, "_"))
}

// Strip and Sign: Go has no arm64e target, so this code runs only in arm64 and x86_64
// processes, whose __auth_got (if any) holds plain pointers. Signing is refused rather than
// guessed at; README's limits say what arm64e support needs.
func (rt *dyldRuntime) Strip(p uintptr) uintptr { return p }

func (rt *dyldRuntime) Sign(p, slot uintptr, a AuthInfo) (uintptr, error) {
	return 0, fmt.Errorf("cannot sign for auth slot %#x: this process is not arm64e", slot)
}
