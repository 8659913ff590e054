package main

// The framework's app link test: a small app linked for each of the framework's architectures,
// the framework first, checked with machobind dump (appLinkTest), and its helpers (the
// retargeted libSystem.tbd, a file's bytes).

import (
	"bytes"
	"debug/macho"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/msgtrace/msgtrace/machobind"
)

// appSource is the app the link test builds: a class whose +load sends a message, as an app's
// launch code does, and a main that calls the framework's C API.
const appSource = `#include <msgtrace/msgtrace.h>

__attribute__((objc_root_class))
@interface Early {
	Class isa;
}
+ (void)load;
+ (int)warm;
@end

static int warmed;

@implementation Early
+ (void)load { [self warm]; }
+ (int)warm { return ++warmed; }
@end

int main(void) {
	struct msgtrace_counters c;
	msgtrace_get_counters(&c);
	return [Early warm] == 2 ? 0 : 1;
}
`

// appLinkTest links a small app for each of the framework's architectures, the framework first
// on the link line, then checks with machobind dump what dyld will do with it: the framework is
// the app's first LC_LOAD_DYLIB (dyld initializes an image's dependencies in that order, all of
// them before the image's own +load methods), it resolves through the app's LC_RPATH once
// embedded in the app's bundle, the app has a class with +load (__objc_nlclslist) and imports
// objc_msgSend from libobjc (the slot the framework rebinds before that +load runs). The same
// link with libobjc first shows the check can fail.
func appLinkTest(outdir string, fw frameworkArt, tmp string) {
	dir := filepath.Join(tmp, "app-"+strings.NewReplacer("/", "_", ".", "_").Replace(fw.dir))
	if err := os.MkdirAll(filepath.Join(dir, "lib"), 0o755); err != nil {
		fail(fw.dir, "%v", err)
		return
	}
	src := filepath.Join(dir, "app.m")
	if err := os.WriteFile(src, []byte(appSource), 0o644); err != nil {
		fail(fw.dir, "%v", err)
		return
	}
	libdir := filepath.Join(dir, "lib")
	if err := retargetLibSystem(filepath.Join(libdir, "libSystem.tbd")); err != nil {
		fail(fw.dir, "%v", err)
		return
	}
	fwParent := filepath.Join(outdir, filepath.Dir(fw.dir))
	for _, arch := range fw.archs {
		where := fw.dir + " [" + arch + "] app"
		target := arch + "-apple-"
		switch fw.platform {
		case platformMacOS:
			target += "macos" + *flagMacOSMin
		case platformIOS:
			target += "ios" + *flagIOSMin
		case platformIOSSimulator:
			target += "ios" + *flagIOSMin + "-simulator"
		}
		link := func(exe string, libsFirst bool) (*machobind.SliceDump, error) {
			libs := []string{"-framework", "msgtrace", "-lobjc", "-lSystem"}
			if libsFirst {
				libs = []string{"-lobjc", "-lSystem", "-framework", "msgtrace"}
			}
			args := append([]string{"-target", target, "-fuse-ld=lld", "-nostdlib", "-Wall", "-Werror", "-isysroot", *flagSDK,
				"-F", fwParent, "-L", libdir, "-L", filepath.Join(*flagSDK, "usr/lib"),
				"-Wl,-rpath," + fw.rpath, "-o", exe}, libs...)
			args = append(args, src)
			if out, err := exec.Command(*flagClang, args...).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("%s %s: %v\n%s", *flagClang, strings.Join(args, " "), err, out)
			}
			d, err := runDump(exe)
			if err != nil {
				return nil, err
			}
			if len(d.Slices) != 1 {
				return nil, fmt.Errorf("%d slices", len(d.Slices))
			}
			return &d.Slices[0], nil
		}
		bundle := filepath.Join(dir, arch, "App.app")
		exe := filepath.Join(bundle, fw.appDir, "App")
		if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
			fail(where, "%v", err)
			continue
		}
		s, err := link(exe, false)
		if err != nil {
			fail(where, "link: %v", err)
			continue
		}
		if s.Filetype != "execute" || s.Arch != arch || !strings.EqualFold(s.Platform, platformNames[fw.platform]) {
			fail(where, "not a %s %s executable: %s %s %s", arch, platformNames[fw.platform], s.Filetype, s.Arch, s.Platform)
		}
		var order []string
		for _, l := range s.Dylibs {
			order = append(order, l.Path)
		}
		if len(order) == 0 || order[0] != fw.installName() {
			fail(where, "LC_LOAD_DYLIB order %v: the framework is not first", order)
		}
		// embedded as Xcode's Embed & Sign does: the bundle's Frameworks directory
		if err := copyTree(filepath.Join(outdir, fw.dir), filepath.Join(bundle, fw.fwDir, "msgtrace.framework")); err != nil {
			fail(where, "embedding: %v", err)
			continue
		}
		resolved := ""
		if f, err := macho.Open(exe); err != nil {
			fail(where, "%v", err)
		} else {
			for _, l := range f.Loads {
				if r, ok := l.(*macho.Rpath); ok && strings.HasPrefix(r.Path, "@executable_path/") {
					p := filepath.Join(filepath.Dir(exe), strings.TrimPrefix(r.Path, "@executable_path/"),
						strings.TrimPrefix(fw.installName(), "@rpath/"))
					if _, err := os.Stat(p); err == nil && resolved == "" {
						resolved = p
					}
				}
			}
			hasLoad := f.Section("__objc_nlclslist") != nil
			f.Close()
			if !hasLoad {
				fail(where, "no __objc_nlclslist: the app's class with +load is not there")
			}
		}
		if resolved == "" {
			fail(where, "%s does not resolve through the app's LC_RPATH to the embedded framework", fw.installName())
		} else if a, b := fileBytes(resolved), fileBytes(filepath.Join(outdir, fw.binary())); a == nil || !bytes.Equal(a, b) {
			fail(where, "%s resolves to %s, which is not the framework's binary", fw.installName(), resolved)
		}
		send := false
		for _, p := range s.Pointers {
			if p.Symbol == "_objc_msgSend" && p.Library == "/usr/lib/libobjc.A.dylib" {
				send = true
			}
		}
		if !send {
			fail(where, "no _objc_msgSend slot bound to libobjc in the app")
		}
		// the control: libraries before the framework on the link line put it later
		if s2, err := link(filepath.Join(dir, arch, "App-libs-first"), true); err != nil {
			fail(where, "link (libraries first): %v", err)
		} else if len(s2.Dylibs) == 0 || s2.Dylibs[0].Path == fw.installName() {
			fail(where, "linked with libobjc first, the framework is still the first LC_LOAD_DYLIB: the order check proves nothing")
		}
		fmt.Printf("ok  %-38s %-7s app linked with -framework msgtrace first: LC_LOAD_DYLIB %s; embedded, %s -> %s; +load class, objc_msgSend slot\n",
			fw.dir, arch, strings.Join(order, ", "), fw.installName(), strings.TrimPrefix(resolved, dir+"/"))
	}
}

func fileBytes(p string) []byte {
	b, _ := os.ReadFile(p)
	return b
}

// retargetLibSystem writes zig's complete macOS libSystem.tbd with the iOS and simulator targets
// added (the SDK's own stub lists too few symbols for Go's runtime).
func retargetLibSystem(dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	src, err := os.ReadFile(*flagLibSystem)
	if err != nil {
		return err
	}
	src = regexp.MustCompile(`\barm64-macos\b`).ReplaceAll(src, []byte("arm64-macos, arm64-ios, arm64-ios-simulator"))
	src = regexp.MustCompile(`\bx86_64-macos\b`).ReplaceAll(src, []byte("x86_64-macos, x86_64-ios-simulator"))
	return os.WriteFile(dst, src, 0o644)
}
