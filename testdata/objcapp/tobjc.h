/*
 * tobjc: a small Objective-C runtime for Linux tests. It exports the real runtime's names and
 * contracts (objc_msgSend, objc_msgSendSuper2, class_getName, ...) so that a program written
 * like compiled Objective-C sends every message through imported objc_msgSend slots, which is
 * what msgtrace rebinds.
 *
 * Layout read by the assembly (tobjc_*.S), checked by tobjc.c:
 *   struct tobjc_class { Class isa; Class superclass; struct tobjc_method *methods; ... }
 *   methods end with a {0, 0} entry.
 *
 * Small objects as GNUstep's libobjc2 makes them: a receiver whose low TOBJC_SMALL_MASK bits
 * are not 0 is no pointer but a value, its class tobjc_small_classes[receiver & mask], set by
 * objc_registerSmallObjectClass_np (libobjc2's name and contract for 64-bit).
 */
#ifndef TOBJC_H
#define TOBJC_H

#define TOBJC_CLASS_SUPER 8
#define TOBJC_CLASS_METHODS 16
#define TOBJC_METHOD_SIZE 16
#define TOBJC_SMALL_MASK 7

#ifndef __ASSEMBLER__
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef struct tobjc_class *Class;
typedef struct tobjc_object {
	Class isa;
} *id;
typedef const struct tobjc_selector *SEL;
typedef void (*IMP)(void);
typedef signed char BOOL;

struct tobjc_method {
	SEL sel;
	IMP imp;
};
struct tobjc_class {
	Class isa;        /* the metaclass; a metaclass's isa is itself */
	Class superclass; /* a metaclass's superclass is its class's superclass's metaclass */
	struct tobjc_method *methods;
	size_t nmethods, cap;
	const char *name;
	int meta;
	int registered;
};
/* objc_msgSendSuper2: lookup starts at current_class's superclass. */
struct objc_super {
	id receiver;
	Class current_class;
};

id objc_msgSend(id self, SEL op, ...);
id objc_msgSendSuper2(struct objc_super *super, SEL op, ...);
#if defined(__x86_64__)
void objc_msgSend_stret(void *ret, id self, SEL op, ...);
double objc_msgSend_fpret(id self, SEL op, ...);
#endif

const char *class_getName(Class cls);
const char *sel_getName(SEL sel);
Class object_getClass(id obj);
Class class_getSuperclass(Class cls);
BOOL class_isMetaClass(Class cls);
Class objc_getClass(const char *name);
SEL sel_registerName(const char *name);

Class objc_allocateClassPair(Class superclass, const char *name, size_t extra);
BOOL class_addMethod(Class cls, SEL name, IMP imp, const char *types);
void objc_registerClassPair(Class cls);
id class_createInstance(Class cls, size_t extra);
/* cls is the class of every receiver whose low bits are mask (1-7); 0 when mask is out of range
 * or taken by another class. */
BOOL objc_registerSmallObjectClass_np(Class cls, unsigned long mask);
#ifdef __cplusplus
}
#endif
#endif
#endif
