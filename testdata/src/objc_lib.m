/* Dylib fixture: the classes plus an exported C entry point that sends messages. */
#include "objc_classes.m"

int fixture_lib_entry(void) {
	id c = [Child new];
	return [c value] + (int)[c ratio] + helper_tls;
}
