package agent

import (
	"fmt"
	"os"
	"path"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/msgtrace/msgtrace"
	"github.com/msgtrace/msgtrace/machobind"
)

// methodState is what method capture installed in this process.
type methodState struct {
	mu       sync.Mutex
	stats    msgtrace.MethodStats // summed over the install and every later module
	took     time.Duration        // the first install
	hook     *machobind.Hook      // __objc_exec_class rebound (gcc's runtime)
	restored bool
}

// captureSends reports whether objc_msgSend and its variants are to be interposed.
func (c Config) captureSends() bool { return c.Capture != "methods" }

// captureMethods reports whether methods are to be instrumented with trampolines.
func (c Config) captureMethods() bool { return c.Capture != "sends" }

// installMethods instruments the methods of the classes the configuration selects, now and as
// later classes arrive (gcc's runtime: each module's classes once its constructor registered
// them; the rebinding covers every object, those dlopened later included).
func (a *Agent) installMethods(rt machobind.Runtime) error {
	if !a.cfg.captureMethods() || msgtrace.MethodsRuntime() != msgtrace.RuntimeGNU && msgtrace.MethodsRuntime() != msgtrace.RuntimeApple {
		return nil
	}
	sel := classSelector(a.cfg.Methods)
	m := &a.methods
	m.mu.Lock()
	defer m.mu.Unlock()
	start := time.Now()
	m.stats = msgtrace.InstallMethods(selectClasses(msgtrace.Classes(), sel))
	m.took = time.Since(start)
	if rs := msgtrace.ModuleRebindings(func(classes []uintptr) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if !m.restored {
			addStats(&m.stats, msgtrace.InstallMethods(selectClasses(classes, sel)))
		}
	}); len(rs) > 0 {
		h, err := machobind.NewRebinder(rt).Rebind(rs...)
		if err != nil {
			return fmt.Errorf("msgtrace: watching for classes registered later: %w", err)
		}
		m.hook = h
		// An object dlopened later ran its module constructors inside dlopen, before its slots
		// were rebound: when dlopen returns, the classes it registered are instrumented.
		if err := rt.WatchImages(func(machobind.Loaded) {
			m.mu.Lock()
			defer m.mu.Unlock()
			if !m.restored {
				addStats(&m.stats, msgtrace.InstallMethods(selectClasses(msgtrace.Classes(), sel)))
			}
		}); err != nil {
			return fmt.Errorf("msgtrace: watching for objects loaded later: %w", err)
		}
	}
	if os.Getenv("MSGTRACE_VERBOSE") != "" {
		fmt.Fprintf(os.Stderr, "msgtrace: methods: %d instrumented in %d classes in %v (%d never instrumented, %d past the pool of %d)\n",
			m.stats.Instrumented, m.stats.Classes, m.took.Round(time.Microsecond), m.stats.Never, m.stats.Full, msgtrace.TrampolinePool)
	}
	return nil
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
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stats.Instrumented == 0 || m.restored {
		return
	}
	if m.hook != nil {
		m.hook.Undo()
		m.hook = nil
	}
	msgtrace.RestoreMethods()
	m.restored = true
}

// MethodStats is what method capture instrumented so far, and how long the first install took.
func (a *Agent) MethodStats() (msgtrace.MethodStats, time.Duration) {
	a.methods.mu.Lock()
	defer a.methods.mu.Unlock()
	return a.methods.stats, a.methods.took
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
		for _, p := range patterns {
			if ok, _ := path.Match(p, name); ok {
				return true
			}
			if ok, _ := path.Match(p, base); ok && image != "" {
				return true
			}
		}
		return false
	}
}

// selectClasses keeps the classes sel accepts.
func selectClasses(classes []uintptr, sel func(name, image string) bool) []uintptr {
	var out []uintptr
	for _, c := range classes {
		if sel(msgtrace.ClassName(c), msgtrace.ImageOf(c)) {
			out = append(out, c)
		}
	}
	return out
}

// systemImage reports whether an object belongs to the system rather than the app: on Linux,
// objects in the system library directories; on Apple platforms, images in the dyld shared
// cache (simulator frameworks load from .../RuntimeRoot/System, so no path decides) and the
// tools Xcode injects (XCTest, Main Thread Checker). The main program is never a system image.
func systemImage(image string) bool {
	if image == "" {
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
