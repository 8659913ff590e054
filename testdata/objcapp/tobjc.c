/* tobjc's C half: selectors, classes, introspection. The dispatch is in tobjc_*.S. */
#include "tobjc.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(offsetof(struct tobjc_class, superclass) == TOBJC_CLASS_SUPER, "superclass");
_Static_assert(offsetof(struct tobjc_class, methods) == TOBJC_CLASS_METHODS, "methods");
_Static_assert(sizeof(struct tobjc_method) == TOBJC_METHOD_SIZE, "method");

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Selectors are interned names: one pointer per name. */
struct tobjc_selector {
	struct tobjc_selector *next;
	char name[];
};
static struct tobjc_selector *selectors;

SEL sel_registerName(const char *name) {
	pthread_mutex_lock(&lock);
	struct tobjc_selector *s;
	for (s = selectors; s; s = s->next)
		if (strcmp(s->name, name) == 0)
			break;
	if (!s) {
		s = malloc(sizeof *s + strlen(name) + 1);
		strcpy(s->name, name);
		s->next = selectors;
		selectors = s;
	}
	pthread_mutex_unlock(&lock);
	return s;
}

const char *sel_getName(SEL sel) { return sel ? sel->name : "<null selector>"; }

static struct tobjc_method empty_methods[1];
#define MAX_CLASSES 256
static Class classes[MAX_CLASSES];
static int nclasses;

Class objc_allocateClassPair(Class superclass, const char *name, size_t extra) {
	(void)extra;
	if (objc_getClass(name))
		return NULL;
	Class cls = calloc(1, sizeof *cls), meta = calloc(1, sizeof *meta);
	cls->isa = meta;
	cls->superclass = superclass;
	cls->methods = empty_methods;
	cls->name = strdup(name);
	meta->isa = meta;
	meta->superclass = superclass ? superclass->isa : NULL;
	meta->methods = empty_methods;
	meta->name = cls->name;
	meta->meta = 1;
	return cls;
}

BOOL class_addMethod(Class cls, SEL name, IMP imp, const char *types) {
	(void)types;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < cls->nmethods; i++)
		if (cls->methods[i].sel == name) {
			pthread_mutex_unlock(&lock);
			return 0;
		}
	if (cls->nmethods + 1 >= cls->cap) {
		size_t cap = cls->cap ? cls->cap * 2 : 8;
		struct tobjc_method *m = calloc(cap, sizeof *m);
		memcpy(m, cls->methods, cls->nmethods * sizeof *m);
		/* the old table stays: a message being dispatched may still be reading it */
		cls->methods = m;
		cls->cap = cap;
	}
	cls->methods[cls->nmethods].imp = imp;
	cls->methods[cls->nmethods].sel = name;
	cls->nmethods++;
	pthread_mutex_unlock(&lock);
	return 1;
}

void objc_registerClassPair(Class cls) {
	pthread_mutex_lock(&lock);
	if (nclasses < MAX_CLASSES && !cls->registered) {
		classes[nclasses++] = cls;
		cls->registered = 1;
	}
	pthread_mutex_unlock(&lock);
}

Class objc_getClass(const char *name) {
	Class found = NULL;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nclasses && !found; i++)
		if (strcmp(classes[i]->name, name) == 0)
			found = classes[i];
	pthread_mutex_unlock(&lock);
	return found;
}

id class_createInstance(Class cls, size_t extra) {
	id obj = calloc(1, sizeof *obj + extra);
	obj->isa = cls;
	return obj;
}

const char *class_getName(Class cls) { return cls ? cls->name : "nil"; }
/* The small-object classes by the receiver's low bits; read by the dispatch (tobjc_*.S). */
__attribute__((visibility("hidden"))) Class tobjc_small_classes[TOBJC_SMALL_MASK + 1];

BOOL objc_registerSmallObjectClass_np(Class cls, unsigned long mask) {
	BOOL ok = 0;
	pthread_mutex_lock(&lock);
	if (mask && mask <= TOBJC_SMALL_MASK && !tobjc_small_classes[mask]) {
		tobjc_small_classes[mask] = cls;
		ok = 1;
	}
	pthread_mutex_unlock(&lock);
	return ok;
}

Class object_getClass(id obj) {
	uintptr_t small = (uintptr_t)obj & TOBJC_SMALL_MASK;
	return small ? tobjc_small_classes[small] : obj ? obj->isa : NULL;
}
Class class_getSuperclass(Class cls) { return cls ? cls->superclass : NULL; }
BOOL class_isMetaClass(Class cls) { return cls && cls->meta; }

/* Reached from the dispatcher (a tail call, arguments as sent) when no class has the method. */
void tobjc_unrecognized(id self, SEL op) {
	fprintf(stderr, "tobjc: unrecognized selector %s sent to an instance of %s\n", sel_getName(op),
		class_getName(object_getClass(self)));
	abort();
}
