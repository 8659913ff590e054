/* A library the test app loads with dlopen after the tracer installed: its own imported
 * objc_msgSend slot must be rebound when dlopen returns. */
#include "tobjc.h"

static long imp_work(id self, SEL cmd) {
	(void)self, (void)cmd;
	return 42;
}

long plugin_run(void) {
	Class c = objc_allocateClassPair(objc_getClass("Base"), "Plugin", 0);
	SEL work = sel_registerName("work");
	class_addMethod(c, work, (IMP)imp_work, "l@:");
	objc_registerClassPair(c);
	id p = class_createInstance(c, 0);
	return ((long (*)(id, SEL))objc_msgSend)(p, work);
}
