/* Executable fixture: message sends (objc_msgSend), a super call (objc_msgSendSuper2 through
 * objc_classes.m), float and struct returns, and imports from libhelper incl. a TLV. */
#include "objc_classes.m"

int main(int argc, char **argv) {
	id c = [Child new];
	Rect f = [c frame];
	printf("%d %f %f %d\n", [c value], [c ratio], f.w, helper_tls + argc);
	return 0;
}
