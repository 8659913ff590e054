package agent

import (
	"runtime"
	"testing"
)

func TestClassSelector(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("system directories are Linux's")
	}
	for _, c := range []struct {
		patterns    []string
		name, image string
		want        bool
	}{
		{[]string{"app"}, "Num", "/tmp/x/sortapp", true},
		{[]string{"app"}, "Num", "", true}, // the main program may have no path
		{[]string{"app"}, "NSString", "/usr/lib/x86_64-linux-gnu/libgnustep-base.so.1.28", false},
		{[]string{"app"}, "Plugin", "/opt/app/lib/plugin.so", true},
		{[]string{"all"}, "NSString", "/usr/lib/x86_64-linux-gnu/libgnustep-base.so.1.28", true},
		{[]string{"NS*Array"}, "NSMutableArray", "/usr/lib/x86_64-linux-gnu/libgnustep-base.so.1.28", true},
		{[]string{"NS*Array"}, "GSArray", "/usr/lib/x86_64-linux-gnu/libgnustep-base.so.1.28", false},
		{[]string{"Calc", "libgnustep-base.so*"}, "GSArray", "/usr/lib/x86_64-linux-gnu/libgnustep-base.so.1.28", true},
		{[]string{"EdenMath"}, "EMController", "/usr/bin/EdenMath", true},
		{[]string{"EdenMath"}, "EMController", "", false},
		// a Swift class, by its runtime name or as people write it
		{[]string{"ApertureCLI.*"}, "_TtC11ApertureCLI4Once", "/opt/aperture", true},
		{[]string{"_TtC11ApertureCLI*"}, "_TtC11ApertureCLI4Once", "/opt/aperture", true},
		{[]string{"ApertureCLI.Once"}, "_TtC11ApertureCLI4Once", "/opt/aperture", true},
		{[]string{"Aperture.*"}, "_TtC11ApertureCLI4Once", "/opt/aperture", false},
		{[]string{"Swift.*"}, "_TtCs12_SwiftObject", "/usr/lib/swift/libswiftCore.dylib", true},
	} {
		if got := classSelector(c.patterns)(c.name, c.image); got != c.want {
			t.Errorf("MSGTRACE_METHODS=%v: %s in %q selected %v, want %v", c.patterns, c.name, c.image, got, c.want)
		}
	}
}
