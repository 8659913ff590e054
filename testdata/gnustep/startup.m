/* A small Foundation program (gnustep-base, gcc's GNU runtime) for the fixed cost of tracing a
 * process: it starts, makes a few hundred calls into methods of its own (sorting 100 numbers
 * with -[Num compare:], each calling -[Num value]) and Foundation, prints one line and exits.
 * What it records does not matter; the time from exec to exit, traced and untraced, does
 * (scripts/bench-fixedcost.sh). With STARTUP_STAMPS set it prints the wall clock (µs) at main's
 * entry and return on stderr, so that the bench tells the time before main and after it apart
 * from main's own (which recording each call lengthens). */
#import <Foundation/Foundation.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void stamp(const char *what) {
	struct timespec ts;
	if (getenv("STARTUP_STAMPS") && clock_gettime(CLOCK_REALTIME, &ts) == 0)
		fprintf(stderr, "%s %lld\n", what, (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
}

#include "num.h"

int main(void) {
	stamp("main");
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	NSMutableArray *a = [NSMutableArray array];
	for (int i = 0; i < 100; i++)
		[a addObject:[[[Num alloc] initWithValue:(i * 37) % 101] autorelease]];
	[a sortUsingSelector:@selector(compare:)];
	NSString *s = [NSString stringWithFormat:@"first %d last %d", [[a objectAtIndex:0] value], [[a lastObject] value]];
	printf("%s\n", [s UTF8String]);
	[pool drain];
	stamp("return");
	return 0;
}
