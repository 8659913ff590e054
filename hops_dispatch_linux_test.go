//go:build linux

package msgtrace

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/msgtrace/msgtrace/internal/simdyld"
	"github.com/msgtrace/msgtrace/internal/testfiles"
	"github.com/msgtrace/msgtrace/machobind"
)

// dispatchApp is a macOS program (C) that calls every dispatch function: the eight async ones
// the hops rebind and two that must stay as they are (dispatch_sync, dispatch_async_and_wait),
// linked against libdispatch's exports (a text stub of ours: the SDK stubs have none).
const dispatchApp = `typedef void (*fn_t)(void *);
void dispatch_async(void *q, void *b);
void dispatch_async_f(void *q, void *c, fn_t f);
void dispatch_after(unsigned long long w, void *q, void *b);
void dispatch_after_f(unsigned long long w, void *q, void *c, fn_t f);
void dispatch_barrier_async(void *q, void *b);
void dispatch_barrier_async_f(void *q, void *c, fn_t f);
void dispatch_group_async(void *g, void *q, void *b);
void dispatch_group_async_f(void *g, void *q, void *c, fn_t f);
void dispatch_sync(void *q, void *b);
void dispatch_async_and_wait(void *q, void *b);
static void work(void *c) { (void)c; }
int main(void) {
	dispatch_async(0, 0); dispatch_async_f(0, 0, work);
	dispatch_after(0, 0, 0); dispatch_after_f(0, 0, 0, work);
	dispatch_barrier_async(0, 0); dispatch_barrier_async_f(0, 0, work);
	dispatch_group_async(0, 0, 0); dispatch_group_async_f(0, 0, 0, work);
	dispatch_sync(0, 0); dispatch_async_and_wait(0, 0);
	return 0;
}
`

const dispatchTBD = `--- !tapi-tbd
tbd-version:     4
targets:         [ x86_64-macos, arm64-macos ]
install-name:    '/usr/lib/system/libdispatch.dylib'
current-version: 1.0
exports:
  - targets:         [ x86_64-macos, arm64-macos ]
    symbols:         [ _dispatch_async, _dispatch_async_f, _dispatch_after, _dispatch_after_f, _dispatch_barrier_async,
                       _dispatch_barrier_async_f, _dispatch_group_async, _dispatch_group_async_f, _dispatch_sync,
                       _dispatch_async_and_wait ]
...
`

// TestDispatchRebound: the dispatch rebindings (hops_dispatch.go) on macOS programs built with
// clang and ld64.lld (arm64 and x86_64, chained fixups and classic binds, the lazy slots
// among them) and mapped by the simulated dyld: every slot of the eight async functions points
// at its wrapper and each wrapper's original is what dyld bound, dispatch_sync's and
// dispatch_async_and_wait's slots are left alone, and Undo puts every slot back.
func TestDispatchRebound(t *testing.T) {
	testfiles.NeedTools(t, "clang-19", "ld64.lld-19")
	root := testfiles.Root(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.c"), []byte(dispatchApp), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "libdispatch.tbd"), []byte(dispatchTBD), 0o644); err != nil {
		t.Fatal(err)
	}
	repl := map[string]uintptr{}
	for _, r := range dispatchRebindingList() {
		repl[r.Name] = r.Replacement
	}
	for _, target := range []string{"arm64-apple-macos13", "x86_64-apple-macos13"} {
		for style, fixups := range map[string]string{"chained": "-Wl,-fixup_chains", "classic": "-Wl,-no_fixup_chains"} {
			name := target + "-" + style
			t.Run(name, func(t *testing.T) {
				bin := filepath.Join(dir, name)
				sdk := filepath.Join(root, "sdk")
				cc := exec.Command("clang-19", "-target", target, "-fuse-ld=lld", "-nostdlib", fixups, "-O1", "-isysroot", sdk,
					"-L"+filepath.Join(sdk, "usr", "lib"), "-L"+dir, "-o", bin, filepath.Join(dir, "app.c"), "-lSystem", "-ldispatch")
				if out, err := cc.CombinedOutput(); err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				img, err := simdyld.Load(bin, simdyld.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer img.Close()
				l := machobind.Loaded{Name: bin, Header: img.Header, Slide: img.Slide}
				parsed, err := machobind.ParseLoaded(l)
				if err != nil {
					t.Fatal(err)
				}
				slots, err := parsed.Slots()
				if err != nil {
					t.Fatal(err)
				}
				r := machobind.NewRebinder(&simRuntime{images: []machobind.Loaded{l}})
				h, err := r.Rebind(dispatchRebindingList()...)
				if err != nil {
					t.Fatal(err)
				}
				seen := map[string]bool{}
				for _, s := range slots {
					sym := s.Symbol[min(1, len(s.Symbol)):]
					got := slot(l.Slide + uintptr(s.Addr))
					want, ours := repl[sym]
					switch {
					case ours:
						seen[sym] = true
						if got != want {
							t.Errorf("%s slot %#x holds %#x, want the wrapper %#x", s.Symbol, s.Addr, got, want)
						}
						if orig := uintptr(simdyld.FakeAddress(s.Library, s.Symbol)); h.Original(sym) != orig {
							t.Errorf("%s: original %#x, want %#x", sym, h.Original(sym), orig)
						}
					case sym == "dispatch_sync" || sym == "dispatch_async_and_wait":
						seen[sym] = true
						for _, w := range repl {
							if got == w {
								t.Errorf("%s rebound", sym)
							}
						}
					}
				}
				if len(seen) != len(repl)+2 {
					t.Errorf("slots seen %v, want the %d rebound and the two left alone", seen, len(repl))
				}
				if err := h.Undo(); err != nil {
					t.Fatal(err)
				}
				for _, s := range slots {
					sym := s.Symbol[min(1, len(s.Symbol)):]
					if w, ok := repl[sym]; ok && slot(l.Slide+uintptr(s.Addr)) == w {
						t.Errorf("%s still points at its wrapper after Undo", s.Symbol)
					}
				}
			})
		}
	}
}
