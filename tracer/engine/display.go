package engine

import "github.com/msgtrace/msgtrace/swiftname"

// DisplayName is a method name as a person reads it: a Swift class's runtime name demangled
// ("-[_TtC11ApertureCLI4Once run]" is "-[ApertureCLI.Once run]"), any other name as it is (the
// same string, no allocation). Outputs show it; what identifies a method across runs (diff and
// report keys, the JSON "method" fields, pprof's system names, the Chrome JSON's args.objc)
// stays the runtime name.
func DisplayName(name string) string { return swiftname.Method(name) }

// DisplayIfOther is DisplayName(name) when it differs from name, else "" (the JSON "display"
// fields, left out for names shown as they are).
func DisplayIfOther(name string) string {
	if d := DisplayName(name); d != name {
		return d
	}
	return ""
}
