/* The +load methods of the libraries (TestGNUstepLibraryLoads): gnustep-base implements some
 * (NSObject's, NSProcessInfo's ...), and the runtime sends them as gnustep-base's modules
 * register, before the preload loader's constructor and long before main. main lists every
 * +load the runtime has (class by class, each +load method of a class's own and of its
 * categories, by class name, sorted: the same traced or not, trampolines or not), then the
 * calls +[EarlyFill load] made (baseloadslib.m, a library the program links: its module
 * registers before the loader's constructor too). It sends -[NSObject isProxy] to a class once:
 * +[NSObject isProxy] (the copy gcc's runtime puts in the root's metaclass) in the trace. */
#import <Foundation/Foundation.h>
#include <objc/runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

@interface EarlyFill : NSObject
+ (int)ticks;
@end

@interface AppLoad : NSObject
@end
static int app_loads;
@implementation AppLoad
+ (void)load {
	app_loads++;
}
@end

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	int n = objc_getClassList(NULL, 0);
	Class *cs = malloc((size_t)n * sizeof *cs);
	n = objc_getClassList(cs, n);
	const char **names = NULL;
	size_t k = 0;
	for (int i = 0; i < n; i++) {
		unsigned m = 0;
		Method *ms = class_copyMethodList(object_getClass(cs[i]), &m);
		for (unsigned j = 0; j < m; j++)
			if (strcmp(sel_getName(method_getName(ms[j])), "load") == 0) {
				names = realloc(names, (k + 1) * sizeof *names);
				names[k++] = class_getName(cs[i]);
			}
		free(ms);
	}
	qsort(names, k, sizeof *names, by_name);
	for (size_t i = 0; i < k; i++)
		printf("load %s\n", names[i]);
	/* a root class's instance method sent to a class: the runtime's copy in the metaclass runs */
	if ([AppLoad isProxy])
		printf("AppLoad is a proxy\n");
	printf("app loads %d, early fill ticks %d\n", app_loads, [EarlyFill ticks]);
	free(names);
	free(cs);
	[pool drain];
	return 0;
}
