/* The C constructor of launch.m: linked after it, it runs after the constructor that
 * registers launch.m's classes with gcc's runtime (.init_array runs in link order), and sends
 * them messages through the runtime's own dispatch (objc_msg_lookup), before main. */
#include <objc/message.h>
#include <objc/runtime.h>

extern int launch_before_main;

__attribute__((constructor)) static void launch_early(void) {
	Class early = objc_getClass("Early");
	SEL warm = sel_registerName("warm:");
	if (!early)
		return;
	int (*imp)(Class, SEL, int) = (int (*)(Class, SEL, int))objc_msg_lookup((id)early, warm);
	launch_before_main = imp(early, warm, 1);
}
