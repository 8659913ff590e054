package msgtrace

import "github.com/ebitengine/purego"

// runtimeSymbol finds an exported symbol of the loaded Objective-C runtime (libobjc.A.dylib),
// 0 when there is none.
func runtimeSymbol(name string) uintptr {
	p, err := purego.Dlsym(purego.RTLD_DEFAULT, name)
	if err != nil {
		return 0
	}
	return p
}
