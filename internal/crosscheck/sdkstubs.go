package main

// The SDK stubs (sdk/): the .tbd files read into what each library exports, so that every
// import of a dylib can be resolved in them.

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// stubs: the exported symbols of every library the SDK stubs describe, by install name (a
// .tbd file's documents together: an umbrella and the libraries it re-exports). A framework's
// symbols are also listed under its shallow iOS path.
type stubs map[string]map[string]bool

var tbdList = regexp.MustCompile(`(?s)\b(symbols|weak-symbols|thread-local-symbols|objc-classes|objc-eh-types|objc-ivars):\s*\[([^\]]*)\]`)
var tbdInstall = regexp.MustCompile(`(?m)^install-name:\s*'?([^'\n]+)'?\s*$`)

func loadStubs(files ...string) (stubs, error) {
	st := stubs{}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		m := tbdInstall.FindSubmatch(src)
		if m == nil {
			return nil, fmt.Errorf("%s: no install-name", file)
		}
		name := strings.TrimSpace(string(m[1]))
		syms := map[string]bool{}
		for _, l := range tbdList.FindAllSubmatch(src, -1) {
			for _, s := range strings.Split(string(l[2]), ",") {
				s = strings.Trim(strings.TrimSpace(s), `'"`)
				if s == "" {
					continue
				}
				switch string(l[1]) {
				case "objc-classes":
					syms["_OBJC_CLASS_$_"+s], syms["_OBJC_METACLASS_$_"+s] = true, true
				case "objc-eh-types":
					syms["_OBJC_EHTYPE_$_"+s] = true
				case "objc-ivars":
					syms["_OBJC_IVAR_$_"+s] = true
				default:
					syms[s] = true
				}
			}
		}
		st[name] = syms
		if i := strings.Index(name, ".framework/Versions/"); i >= 0 {
			st[name[:i]+".framework/"+filepath.Base(name)] = syms
		}
	}
	return st, nil
}

var (
	stubsOnce sync.Once
	stubsRead stubs
	stubsErr  error
)

// sdkStubs loads zig's libSystem.tbd and every .tbd under the SDK directory (once).
func sdkStubs() (stubs, error) {
	stubsOnce.Do(func() { stubsRead, stubsErr = readSDKStubs() })
	return stubsRead, stubsErr
}

func readSDKStubs() (stubs, error) {
	files := []string{*flagLibSystem}
	err := filepath.WalkDir(*flagSDK, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".tbd") && filepath.Base(p) != "libSystem.tbd" {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return loadStubs(files...)
}
