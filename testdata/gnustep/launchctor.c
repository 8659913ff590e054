/* A C constructor of launch.m's program, linked after it (so its module registered first): it
 * sends +[Early ctorWork] before main, as compiled Objective-C sends on gcc's runtime do (look
 * the method up, call it). */
#include <objc/message.h>
#include <objc/runtime.h>

__attribute__((constructor)) static void launch_ctor(void) {
	Class c = objc_getClass("Early");
	SEL s = sel_registerName("ctorWork");
	if (c)
		objc_msg_lookup((id)c, s)((id)c, s);
}
