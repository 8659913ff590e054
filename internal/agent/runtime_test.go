package agent

import (
	"testing"

	"github.com/msgtrace/msgtrace/machobind"
)

// fakeRuntime reports a fixed image list and its own header; nothing else is called.
type fakeRuntime struct {
	machobind.Runtime
	images []machobind.Loaded
	self   uintptr
}

func (f fakeRuntime) Images() ([]machobind.Loaded, error) { return f.images, nil }
func (f fakeRuntime) Self() uintptr                       { return f.self }

func TestScope(t *testing.T) {
	imgs := []machobind.Loaded{{Name: "host", Header: 0x1000}, {Name: "libmsgtrace", Header: 0x9000}}
	for _, c := range []struct {
		name      string
		self      uintptr
		images    []machobind.Loaded
		wantSelf  uintptr
		wantWhole bool
	}{
		{"preloaded: its own image is exempt", 0x9000, imgs, 0x9000, false},
		{"linked into the main program: nothing exempt", 0x1000, imgs, 0, true},
		{"no images listed", 0x1000, nil, 0x1000, false},
		{"own image unknown", 0, imgs, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rt := scope(fakeRuntime{images: c.images, self: c.self})
			_, whole := rt.(wholeProcess)
			if whole != c.wantWhole || rt.Self() != c.wantSelf {
				t.Errorf("scope: whole process %v, Self %#x; want %v, %#x", whole, rt.Self(), c.wantWhole, c.wantSelf)
			}
			if whole {
				got, _ := rt.Images()
				if len(got) != len(c.images) {
					t.Errorf("wholeProcess lists %d images, the runtime %d", len(got), len(c.images))
				}
				// the fake runtime lists no mappings: the rebinder is told to ask page by page
				if _, err := rt.(machobind.MappingLister).Mappings(); err == nil {
					t.Error("wholeProcess lists mappings its runtime does not have")
				}
			}
		})
	}
}
