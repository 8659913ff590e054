/* Test classes for the selftest package: {superclass, methods} is what the dispatcher reads. */
#include <stdint.h>
struct st_class {
	struct st_class *super;
	void *methods;
	const char *name;
	intptr_t meta;
};
int selftest_run(void);
void selftest_use_namer(void);
