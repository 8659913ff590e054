//go:build !darwin

package msgtrace

// runtimeSymbol: only Apple's runtime exports the masks; GNU's and GNUstep's objects have a
// plain class pointer and no tagged pointers, which is the fallback.
func runtimeSymbol(name string) uintptr { return 0 }
