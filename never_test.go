package msgtrace

import "testing"

// TestNeverInstrumented checks the never-instrument lookup (methods_tramps.c: the first four bytes of a
// name, then strcmp) against the list it holds and against names that share a prefix, a length
// or a bucket with those on it.
func TestNeverInstrumented(t *testing.T) {
	never := []string{
		"retain", "release", "autorelease", "retainCount", "_tryRetain", "_isDeallocating",
		"allowsWeakReference", "retainWeakReference", "alloc", "allocWithZone:", "new", "self",
		"class", "isKindOfClass:", "respondsToSelector:", "dealloc", ".cxx_construct",
		".cxx_destruct", "load", "forwardInvocation:", "forwardingTargetForSelector:",
		"methodSignatureForSelector:", "instanceMethodSignatureForSelector:", "resolveInstanceMethod:",
		"resolveClassMethod:", "doesNotRecognizeSelector:", "forward::", "performv::",
		"methodForSelector:", "instanceMethodForSelector:",
	}
	for _, s := range never {
		if !NeverInstrumented(s) {
			t.Errorf("%q: instrumented, but it is on the never-instrument list", s)
		}
	}
	for _, s := range []string{
		"", "r", "re", "ret", "reta", "retai", "retainX", "retain:", "releaseAll", "lo", "loa",
		"load:", "loadX", "init", "initialize", "initWithValue:", "sel", "selfish", "clas",
		"classForCoder", "className", "forward:", "forward:::", "alloc:", "allocWithZone",
		"newObject", "ne", ".cxx", ".cxx_constructX", "performv:", "performSelector:",
		"description", "isEqual:", "hash", "value", "compare:", "deallocX", "Retain", "LOAD",
	} {
		if NeverInstrumented(s) {
			t.Errorf("%q: never instrumented, but it is not on the list", s)
		}
	}
}
