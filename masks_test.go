package msgtrace

import (
	"testing"
	"unsafe"
)

// TestRuntimeMasks: the masks the runtime exports replace the fallback, a runtime with tagged
// pointers disabled (mask 0) gets none, and one that exports nothing leaves the fallback;
// unaligned receivers are tagged under every mask.
func TestRuntimeMasks(t *testing.T) {
	saved := CurrentMasks()
	defer func() {
		applyRuntimeMasks(func(name string) uintptr {
			switch name {
			case symClassMask:
				return uintptr(unsafe.Pointer(&saved.Class))
			case symTagMask:
				return uintptr(unsafe.Pointer(&saved.Tag))
			}
			return 0
		})
		masksSource = saved.Source
	}()
	if saved.Source != "fallback" {
		t.Fatalf("masks before Install come from %q, want the fallback", saved.Source)
	}
	if saved.Tag&unalignedBits != unalignedBits {
		t.Errorf("fallback tag mask %#x does not hold the unaligned bits %#x", saved.Tag, unalignedBits)
	}
	runtime := func(class, tag *uint64) func(string) uintptr {
		return func(name string) uintptr {
			switch {
			case name == symClassMask && class != nil:
				return uintptr(unsafe.Pointer(class))
			case name == symTagMask && tag != nil:
				return uintptr(unsafe.Pointer(tag))
			}
			return 0
		}
	}
	class, tag, zero := uint64(0x00007ffffffffff8), uint64(1)<<63, uint64(0)
	for _, c := range []struct {
		name       string
		class, tag *uint64
		want       Masks
	}{
		{"nothing exported", nil, nil, saved},
		{"a zero class mask is ignored", &zero, &tag, saved},
		{"both", &class, &tag, Masks{class, tag | unalignedBits, "runtime"}},
		{"tagged pointers disabled", &class, &zero, Masks{class, unalignedBits, "runtime"}},
		{"no tag mask exported", &class, nil, Masks{class, unalignedBits, "runtime"}},
	} {
		if got := applyRuntimeMasks(runtime(c.class, c.tag)); got != c.want {
			t.Errorf("%s: masks %+v, want %+v", c.name, got, c.want)
		}
	}
}
