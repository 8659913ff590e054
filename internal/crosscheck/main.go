// Command crosscheck checks the Apple libraries scripts/cross.sh builds. Every artifact is read
// back with `machobind dump --json` (archives member by member: dump reads Mach-O files, not
// static archives, so members are extracted with llvm-ar first) and with debug/macho, and checked
// for: its architectures; its platform (LC_BUILD_VERSION: macOS 1, iOS 2, iOS simulator 7); its
// file type; the msgtrace_* functions the public header declares, exported; the dylibs' install
// name, dependencies and (arm64) ad-hoc code signature; evidence that runtime/cgo was compiled
// for iOS (TARGET_OS_IPHONE); and the library's own imports of objc_msgSend: a dylib's are
// reported (the rebinder skips its own image), an archive must have none (linked into a host
// they would be the host's, which is rebound); the interposers' fallback masks (rt.c's
// msgtrace_isa_mask and msgtrace_tag_mask, read from the data section) against objc4's values
// for the target (masks.go). Each iOS archive is also linked into a small
// program for its target with clang-19 and ld64.lld-19, which must leave nothing undefined.
//
// Every dylib (libmsgtrace.dylib and the msgtrace.framework binaries) is also checked for its
// initializers in order (Go's runtime start, then ctor.c's msgtrace_ctor) and read a second way
// with llvm-objdump: the msgtrace_* functions in its export trie, its binds against machobind
// dump's pointer slots, and every import in the SDK stubs (framework.go). The frameworks'
// bundles (Info.plist against the binary, Headers, Modules, the macOS symlinks) and
// msgtrace.xcframework are checked, and a small app with a +load class is linked against each
// framework, which must be its first LC_LOAD_DYLIB and resolve through its rpath once embedded.
//
// usage: go run ./internal/crosscheck [flags] OUTDIR   (scripts/cross-check.sh passes the tools)
//
// Any mismatch prints "crosscheck: ARTIFACT: ..." and the exit status is 1.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// artifact is one file cross.sh promises.
type artifact struct {
	path     string
	archive  bool     // static archive of MH_OBJECT members, else a dylib
	archs    []string // machobind's names, sorted
	platform uint32   // LC_BUILD_VERSION platform
	install  string   // a dylib's LC_ID_DYLIB ("" for installName)
}

const (
	platformMacOS        = 1
	platformIOS          = 2
	platformIOSSimulator = 7
	installName          = "@rpath/libmsgtrace.dylib"
)

var artifacts = []artifact{
	{"macos-arm64/libmsgtrace.dylib", false, []string{"arm64"}, platformMacOS, ""},
	{"macos-x86_64/libmsgtrace.dylib", false, []string{"x86_64"}, platformMacOS, ""},
	{"macos/libmsgtrace.dylib", false, []string{"arm64", "x86_64"}, platformMacOS, ""},
	{"ios-arm64/libmsgtrace.a", true, []string{"arm64"}, platformIOS, ""},
	{"ios-simulator-arm64/libmsgtrace.a", true, []string{"arm64"}, platformIOSSimulator, ""},
	{"ios-simulator-x86_64/libmsgtrace.a", true, []string{"x86_64"}, platformIOSSimulator, ""},
	{"ios-simulator/libmsgtrace.a", true, []string{"arm64", "x86_64"}, platformIOSSimulator, ""},
	{"ios-arm64/msgtrace.framework/msgtrace", false, []string{"arm64"}, platformIOS, fwInstallName},
	{"ios-simulator/msgtrace.framework/msgtrace", false, []string{"arm64", "x86_64"}, platformIOSSimulator, fwInstallName},
	{"macos/msgtrace.framework/Versions/A/msgtrace", false, []string{"arm64", "x86_64"}, platformMacOS, fwInstallNameMacOS},
}

// platformNames: machobind's spelling of a platform (go-macho's), compared case-insensitively.
var platformNames = map[uint32]string{platformMacOS: "macos", platformIOS: "ios", platformIOSSimulator: "iossimulator"}

var (
	flagMachobind = flag.String("machobind", "bin/machobind", "machobind binary")
	flagAr        = flag.String("ar", "llvm-ar-19", "llvm-ar")
	flagLipo      = flag.String("lipo", "llvm-lipo-19", "llvm-lipo")
	flagClang     = flag.String("clang", "clang-19", "clang for the link test")
	flagSDK       = flag.String("sdk", "sdk", "the SDK stubs (sdk/)")
	flagLibSystem = flag.String("libsystem", ".tools/zig/lib/libc/darwin/libSystem.tbd", "a complete macOS libSystem.tbd (zig's), retargeted for the iOS link test")
	flagSymbols   = flag.String("symbols", "", "comma list of functions that must be exported (default: every msgtrace_*( declared in OUTDIR/msgtrace.h)")
	flagNoLink    = flag.Bool("nolink", false, "skip the iOS link test and the framework's app link test")
	flagObjdump   = flag.String("objdump", "llvm-objdump-19", "llvm-objdump, to read every dylib a second way")
	flagIOSMin    = flag.String("ios-min", "14.0", "the minimum iOS version every iOS and simulator file must carry (cross.sh's MSGTRACE_IOS_MIN)")
	flagMacOSMin  = flag.String("macos-min", "12.0", "the minimum macOS version every macOS file must carry (cross.sh's MSGTRACE_MACOS_MIN)")
)

var failures int

// wantMinOS is the minimum OS version cross.sh was asked for on a platform.
func wantMinOS(platform uint32) string {
	if platform == platformMacOS {
		return *flagMacOSMin
	}
	return *flagIOSMin
}

func fail(art, format string, args ...any) {
	failures++
	fmt.Fprintf(os.Stderr, "crosscheck: %s: %s\n", art, fmt.Sprintf(format, args...))
}

var (
	headerDir string
	notedCF   = map[string]bool{}
)

var declRE = regexp.MustCompile(`\b(msgtrace_[a-z_]*)\s*\(`)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: crosscheck [flags] OUTDIR\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	outdir := flag.Arg(0)
	headerDir, _ = filepath.Abs(outdir)
	var exports []string
	if *flagSymbols != "" {
		for _, s := range strings.Split(*flagSymbols, ",") {
			if s = strings.TrimSpace(s); s != "" {
				exports = append(exports, s)
			}
		}
	} else {
		h, err := os.ReadFile(filepath.Join(outdir, "msgtrace.h"))
		if err != nil {
			fmt.Fprintf(os.Stderr, "crosscheck: %v\n", err)
			os.Exit(1)
		}
		seen := map[string]bool{}
		for _, m := range declRE.FindAllSubmatch(stripComments(h), -1) {
			if n := string(m[1]); !seen[n] {
				seen[n] = true
				exports = append(exports, n)
			}
		}
	}
	if len(exports) == 0 {
		fmt.Fprintf(os.Stderr, "crosscheck: no msgtrace_* functions to look for\n")
		os.Exit(1)
	}
	fmt.Printf("crosscheck: %s: %d exported functions expected: %s\n", outdir, len(exports), strings.Join(exports, " "))
	tmp, err := os.MkdirTemp("", "crosscheck")
	if err != nil {
		fmt.Fprintf(os.Stderr, "crosscheck: %v\n", err)
		os.Exit(1)
	}
	defer os.RemoveAll(tmp)
	for _, art := range artifacts {
		path := filepath.Join(outdir, art.path)
		if _, err := os.Stat(path); err != nil {
			fail(art.path, "missing")
			continue
		}
		if art.archive {
			checkArchive(art, path, exports, tmp)
		} else {
			checkDylib(art, path, exports)
		}
	}
	checkXCFramework(outdir)
	for _, fw := range frameworks {
		checkFramework(outdir, fw)
		if !*flagNoLink {
			appLinkTest(outdir, fw, tmp)
		}
	}
	checkDynamicXCFramework(outdir)
	if failures > 0 {
		fmt.Fprintf(os.Stderr, "crosscheck: %d problems\n", failures)
		os.Exit(1)
	}
	fmt.Printf("crosscheck: all artifacts in %s check out\n", outdir)
}

// checkXCFramework: the framework's libraries and headers are the checked files, byte for byte.
func checkXCFramework(outdir string) {
	xc := filepath.Join(outdir, "libmsgtrace.xcframework")
	pairs := [][2]string{
		{"ios-arm64/libmsgtrace.a", "ios-arm64/libmsgtrace.a"},
		{"ios-arm64_x86_64-simulator/libmsgtrace.a", "ios-simulator/libmsgtrace.a"},
		{"ios-arm64/Headers/msgtrace.h", "msgtrace.h"},
		{"ios-arm64_x86_64-simulator/Headers/msgtrace.h", "msgtrace.h"},
	}
	for _, p := range pairs {
		a, err1 := os.ReadFile(filepath.Join(xc, p[0]))
		b, err2 := os.ReadFile(filepath.Join(outdir, p[1]))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			fail("libmsgtrace.xcframework/"+p[0], "missing or not the same as %s", p[1])
		}
	}
	plist, err := os.ReadFile(filepath.Join(xc, "Info.plist"))
	if err != nil {
		fail("libmsgtrace.xcframework/Info.plist", "%v", err)
		return
	}
	for _, want := range []string{"<string>ios-arm64</string>", "<string>ios-arm64_x86_64-simulator</string>", "<string>simulator</string>", "<string>XFWK</string>"} {
		if !bytes.Contains(plist, []byte(want)) {
			fail("libmsgtrace.xcframework/Info.plist", "does not contain %s", want)
		}
	}
	fmt.Printf("ok  %-38s device + simulator archives and headers identical to the checked files\n", "libmsgtrace.xcframework")
}

// stripComments removes C comments, so that prose mentioning msgtrace_x( is not a declaration.
func stripComments(src []byte) []byte {
	src = regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAll(src, nil)
	return regexp.MustCompile(`//[^\n]*`).ReplaceAll(src, nil)
}
