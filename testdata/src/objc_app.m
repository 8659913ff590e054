/* Executable fixture: message sends (objc_msgSend), super calls (objc_msgSendSuper2 through
 * objc_classes.m), float and struct returns (on x86_64: _stret, _fpret, _fp2ret, Super2_stret),
 * and imports from libhelper incl. a TLV. */
#include "objc_classes.m"

int main(int argc, char **argv) {
	id c = [Child new];
	Rect f = [c frame];
	printf("%d %f %f %f %f %d\n", [c value], [c ratio], f.w, (double)[c precise],
		(double)__real__[c phase], helper_tls + argc);
	return 0;
}
