/* A library with a +load (TestGNUstepLibraryLoads), linked by baseloads.m: as gnustep-base's,
 * its module registers before the preload loader's constructor. Its +load sends +ticks, a method
 * of its own module, while the module registers (before msgtrace fixes up the module's
 * selectors; main sends it again after). EARLY_FILL=N makes it send N messages more, more than a
 * small chunk pool holds, before the drain has started. */
#import <Foundation/Foundation.h>
#include <stdlib.h>

@interface EarlyFill : NSObject
+ (int)ticks;
+ (void)tick:(int)i;
@end

static int ticks;

@implementation EarlyFill
+ (void)load {
	const char *v = getenv("EARLY_FILL");
	int n = v ? atoi(v) : 0;
	for (int i = 0; i < n; i++)
		[self tick:i];
	if ([self ticks] != n)
		abort();
}
+ (void)tick:(int)i {
	ticks += i >= 0;
}
+ (int)ticks {
	return ticks;
}
@end
