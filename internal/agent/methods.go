package agent

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/msgtrace/msgtrace"
	"github.com/msgtrace/msgtrace/machobind"
	"github.com/msgtrace/msgtrace/swiftname"
)

// methodState is what method capture installed in this process.
type methodState struct {
	mu       sync.Mutex
	stats    msgtrace.MethodStats // summed over the install and every later module
	took     time.Duration        // the first install
	hook     *machobind.Hook      // __objc_exec_class & co. rebound
	restored bool
	sel      func(name, image string) bool // MSGTRACE_METHODS
	appOnly  bool                          // MSGTRACE_METHODS=app: only images outside the system
	all      bool                          // MSGTRACE_METHODS=all: every class
	rt       machobind.Runtime
	watching bool // the image watcher is registered (once: it outlives a stop)
}

// captureSends reports whether objc_msgSend and its variants are to be interposed.
func (c Config) captureSends() bool { return c.Capture != "methods" }

// captureMethods reports whether methods are to be instrumented with trampolines.
func (c Config) captureMethods() bool { return c.Capture != "sends" }

// capturesMethods reports whether the configuration asks for method capture and the process's
// Objective-C runtime is one it works with.
func (a *Agent) capturesMethods() bool {
	rt := msgtrace.MethodsRuntime()
	return a.cfg.captureMethods() && (rt == msgtrace.RuntimeGNU || rt == msgtrace.RuntimeApple || rt == msgtrace.RuntimeGNUstep)
}

// installMethodsWith instruments the methods of the classes the configuration selects, now and
// as later classes arrive (gcc's runtime: each module's classes once its constructor registered
// them; the rebinding covers every object, those dlopened later included). The rebindings that
// report later classes (watchRebindings) were made in the same pass as the capture's: h is
// their hook (nil: there were none).
func (a *Agent) installMethodsWith(rt machobind.Runtime, h *machobind.Hook) error {
	m := &a.methods
	m.locked(func() { m.install(a.cfg.Methods, rt) })
	if a.cfg.Flows {
		msgtrace.InstallHops() // the classes registered before; later ones as they register
	}
	if h == nil {
		return nil
	}
	return m.watchWith(h)
}

// locked runs fn holding the Objective-C runtime's lock (gcc's runtime), then m.mu: always in
// that order, since the runtime calls the rebound class_addMethod with its lock held.
func (m *methodState) locked(fn func()) {
	msgtrace.WithRuntimeLock(func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		fn()
	})
}

// install is installMethods' first install, with the locks held.
func (m *methodState) install(methods []string, rt machobind.Runtime) {
	m.sel, m.rt = classSelector(methods), rt
	m.appOnly = len(methods) == 0 || len(methods) == 1 && methods[0] == "app"
	m.all = len(methods) == 1 && methods[0] == "all"
	// MSGTRACE_METHODS=all may have instrumented the modules registered so far, in C, as they
	// arrived (the preload loader's early start): from now on they come this way
	early := msgtrace.EndEarlyMethods()
	start := time.Now()
	m.stats = early
	addStats(&m.stats, msgtrace.InstallMethods(m.pick(m.candidates())))
	m.installImageCategories()
	m.took = time.Since(start)
	if os.Getenv("MSGTRACE_VERBOSE") != "" {
		if early.Instrumented > 0 {
			fmt.Fprintf(os.Stderr, "msgtrace: methods: %d instrumented in %d classes as their modules registered, before main's install\n",
				early.Instrumented, early.Classes)
		}
		fmt.Fprintf(os.Stderr, "msgtrace: methods: %d instrumented in %d classes in %v (%d never instrumented, %d past the pool of %d)\n",
			m.stats.Instrumented, m.stats.Classes, m.took.Round(time.Microsecond), m.stats.Never, m.stats.Full, msgtrace.TrampolinePool)
	}
}

// installImageCategories: on Apple platforms, where the selection is not every class, the
// categories of the selected images are instrumented whatever class they extend (an app's
// category on a class of the system, its +load among them: the install runs before the app
// image's +load methods). With the locks held.
func (m *methodState) installImageCategories() {
	if m.all || msgtrace.MethodsRuntime() != msgtrace.RuntimeApple {
		return
	}
	imgs, err := m.rt.Images()
	if err != nil {
		return
	}
	for _, l := range imgs {
		if m.sel("", l.Name) {
			addStats(&m.stats, msgtrace.InstallImageCategories(l.Header))
		}
	}
}

// watch rebinds the runtime functions that report classes registered later and, once, watches
// for objects loaded later. Called with no lock held: rebinding looks symbols up (the loader's
// lock, which dlopen holds while module constructors call the rebound __objc_exec_class,
// whose callback takes the runtime's lock and m.mu).
func (m *methodState) watch() error {
	rs := m.watchRebindings()
	if len(rs) == 0 {
		return nil
	}
	h, err := machobind.NewRebinder(m.rt).Rebind(rs...)
	if err != nil {
		return fmt.Errorf("msgtrace: watching for classes registered later: %w", err)
	}
	return m.watchWith(h)
}

// watchRebindings sets the callbacks for modules and classes that arrive later and returns the
// rebindings that report them. Until the first install has chosen the selection (m.sel), the
// callbacks leave what they are given alone: the install finds those classes registered.
func (m *methodState) watchRebindings() []machobind.Rebinding {
	later := func(classes []uintptr) {
		m.locked(func() {
			if !m.restored && m.sel != nil {
				addStats(&m.stats, msgtrace.InstallMethods(m.pick(classes)))
			}
		})
	}
	// an app's categories on classes of the system: their methods, where the class is not
	// selected (gcc's runtime; the methods of a selected class's categories come with it)
	msgtrace.WatchModules(func(mod msgtrace.Module) {
		m.locked(func() {
			if m.sel == nil {
				return
			}
			for i, c := range mod.Categories {
				if !m.restored && m.sel(c, mod.Image) {
					addStats(&m.stats, mod.InstallCategory(i))
				}
			}
		})
	})
	// gcc's runtime: a module's selected methods get trampolines before the runtime registers
	// it, so that the +load it sends then, and what that calls, are traced
	msgtrace.WatchArrivingModules(func(mod msgtrace.ArrivingModule) {
		m.locked(func() {
			if m.restored || m.sel == nil {
				return
			}
			sel := make([]bool, len(mod.Names))
			for i, name := range mod.Names {
				sel[i] = m.sel(name, mod.Image)
			}
			addStats(&m.stats, mod.InstallStatic(sel))
		})
	})
	return msgtrace.ModuleRebindings(later)
}

// watchWith keeps the hook of watchRebindings' rebindings and, the first time, watches for
// objects loaded later.
func (m *methodState) watchWith(h *machobind.Hook) error {
	later := func(classes []uintptr) {
		m.locked(func() {
			if !m.restored && m.sel != nil {
				addStats(&m.stats, msgtrace.InstallMethods(m.pick(classes)))
			}
		})
	}
	m.mu.Lock()
	m.hook = h
	first := !m.watching
	m.watching = true
	m.mu.Unlock()
	if !first {
		return nil
	}
	// Apple: the runtime reports images it read (objc_addLoadImageFunc), their categories
	// included: every class is looked at again, and the selected images' categories.
	if msgtrace.WatchLoadedImages(func() {
		later(m.candidates())
		m.locked(func() {
			if !m.restored && m.sel != nil {
				m.installImageCategories()
			}
		})
	}) {
		return nil
	}
	// gcc's runtime: an object dlopened later ran its module constructors inside dlopen,
	// before its slots were rebound: when dlopen returns, the classes it registered are
	// instrumented, and those given methods (UnseenClasses: a GUI app dlopens ~150 objects as
	// it starts, and each pass over its thousand classes, method by method, was ~1 M
	// instructions; the first pass looks at every class and remembers them, rather than the
	// install before main). (Apple before macOS 10.15: dyld's add-image callback.)
	if err := m.rt.WatchImages(func(machobind.Loaded) {
		m.locked(func() {
			if !m.restored && m.sel != nil {
				addStats(&m.stats, msgtrace.InstallMethods(m.pick(msgtrace.UnseenClasses(msgtrace.Classes()))))
			}
		})
	}); err != nil {
		return fmt.Errorf("msgtrace: watching for objects loaded later: %w", err)
	}
	return nil
}

// candidates are the classes to look at: every class the runtime has, but on Apple platforms
// with the default selection only those of the images outside the shared cache, found image
// by image (objc_getClassList would realize each of the system's tens of thousands of classes
// first, at launch). Called with m.mu held or before the watchers start.
func (m *methodState) candidates() []uintptr {
	if m.appOnly && msgtrace.MethodsRuntime() == msgtrace.RuntimeApple {
		if imgs, err := m.rt.Images(); err == nil {
			var out []uintptr
			for _, l := range imgs {
				if !systemImage(l.Name) {
					out = append(out, msgtrace.ImageClasses(l.Name)...)
				}
			}
			return out
		}
	}
	return msgtrace.Classes()
}

// reinstallMethods instruments the selected methods again after a stop restored them (each
// method gets the trampoline it had before), and watches for later classes again.
func (a *Agent) reinstallMethods() error {
	m := &a.methods
	again := false
	m.locked(func() {
		if again = m.restored; again {
			m.restored = false
			addStats(&m.stats, msgtrace.InstallMethods(m.pick(m.candidates())))
			m.installImageCategories()
		}
	})
	if !again {
		return nil
	}
	return m.watch()
}

func addStats(s *msgtrace.MethodStats, t msgtrace.MethodStats) {
	s.Classes += t.Classes
	s.Instrumented += t.Instrumented
	s.Never += t.Never
	s.Full += t.Full
	s.Foreign += t.Foreign
	s.PoolUsed = t.PoolUsed
}

// restoreMethods gives the instrumented methods their IMPs back where they are still ours.
func (a *Agent) restoreMethods() {
	m := &a.methods
	var h *machobind.Hook
	m.locked(func() {
		if m.sel == nil || m.restored {
			return
		}
		h, m.hook = m.hook, nil
		msgtrace.RestoreMethods()
		m.restored = true
	})
	if h != nil {
		h.Undo() // outside the locks, as watch rebinds
	}
}

// MethodStats is what method capture instrumented so far (the methods added to selected classes
// on gcc's runtime included), and how long the first install took.
func (a *Agent) MethodStats() (msgtrace.MethodStats, time.Duration) {
	a.methods.mu.Lock()
	defer a.methods.mu.Unlock()
	st := a.methods.stats
	if st.Classes > 0 {
		addStats(&st, msgtrace.AddedMethods())
	}
	return st, a.methods.took
}

// classSelector turns MSGTRACE_METHODS into a predicate on (class name, image path).
func classSelector(patterns []string) func(name, image string) bool {
	if len(patterns) == 1 && patterns[0] == "all" {
		return func(string, string) bool { return true }
	}
	if len(patterns) == 0 || len(patterns) == 1 && patterns[0] == "app" {
		return func(_, image string) bool { return !systemImage(image) }
	}
	return func(name, image string) bool {
		base := path.Base(image)
		shown := name // a Swift class: its pattern may be written either way (ApertureCLI.*, _TtC11ApertureCLI*)
		if swiftname.IsMangled(name) {
			shown = swiftname.Demangle(name)
		}
		for _, p := range patterns {
			if ok, _ := path.Match(p, name); ok {
				return true
			}
			if ok, _ := path.Match(p, shown); ok && shown != name {
				return true
			}
			if ok, _ := path.Match(p, base); ok && image != "" {
				return true
			}
		}
		return false
	}
}

// pick keeps the classes the selection accepts, asking the runtime only what the selection
// looks at: nothing with all (every class), the image with app (the loaded objects' segments
// read once for all of them), else the name and the image. m.sel set.
func (m *methodState) pick(classes []uintptr) []uintptr {
	switch {
	case m.all:
		return classes
	case m.appOnly:
		imgs := msgtrace.ClassImages(classes) // the objects' segments read once, not per class
		var out []uintptr
		// each object's answer once: a few objects for thousands of classes, so a short list
		// looked through (one object's name is one string: equal at its bytes' address) rather
		// than a map hashing each class's object's name, the map past a few objects
		type answer struct {
			image string
			keep  bool
		}
		var answers []answer
		var more map[string]bool
		for i, c := range classes {
			img, k, found := imgs[i], false, false
			for _, a := range answers {
				if a.image == img {
					k, found = a.keep, true
					break
				}
			}
			if !found {
				if k, found = more[img]; !found {
					k = m.sel("", img)
					if len(answers) < 8 {
						answers = append(answers, answer{img, k})
					} else {
						if more == nil {
							more = map[string]bool{}
						}
						more[img] = k
					}
				}
			}
			if k {
				out = append(out, c)
			}
		}
		return out
	}
	return selectClasses(classes, func(c uintptr) bool { return m.sel(msgtrace.ClassName(c), msgtrace.ClassImage(c)) })
}

// selectClasses keeps the classes keep accepts.
func selectClasses(classes []uintptr, keep func(class uintptr) bool) []uintptr {
	var out []uintptr
	for _, c := range classes {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

// mainExe is the main program's path, resolved (/proc/self/exe on Linux).
var mainExe = sync.OnceValue(func() string {
	p, err := os.Executable()
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return p
})

// inMainProgram reports whether an object is the main program, or lies inside its bundle
// (Debian installs GNUstep applications as /usr/lib/GNUstep/Applications/X.app/X, with their
// bundles and plug-ins inside X.app).
func inMainProgram(image string) bool {
	exe := mainExe()
	if exe == "" {
		return false
	}
	if image == exe {
		return true
	}
	dir := filepath.Dir(exe)
	return strings.HasSuffix(dir, ".app") && strings.HasPrefix(image, dir+"/")
}

// systemImage reports whether an object belongs to the system rather than the app: on Linux,
// objects in the system library directories; on Apple platforms, images in the dyld shared
// cache (simulator frameworks load from .../RuntimeRoot/System, so no path decides) and the
// tools Xcode injects (XCTest, Main Thread Checker). The main program is never a system image.
func systemImage(image string) bool {
	if image == "" || inMainProgram(image) {
		return false
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return msgtrace.InSharedCache(image) || strings.Contains(image, "/XCTest.framework/") ||
			strings.Contains(image, "libXCTest") || strings.Contains(image, "libMainThreadChecker")
	}
	for _, d := range []string{"/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/libexec/"} {
		if strings.HasPrefix(image, d) {
			return true
		}
	}
	return false
}
