/* The cost of an async hop (hops.c): N timers due at once, each added to a run loop mode (the
 * enqueue) and fired by a pass of the run loop in that mode (the execution: its hop's begin and
 * end), against the same work untraced or with MSGTRACE_FLOWS=0. Prints ns per timer, measured
 * around the loop only. */
#import <Foundation/Foundation.h>
#include <stdlib.h>
#include <time.h>

@interface Tick : NSObject
- (void)tick:(NSTimer *)t;
@end
@implementation Tick
- (void)tick:(NSTimer *)t {
}
@end

static double now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	long n = argc > 1 ? atol(argv[1]) : 100000;
	Tick *t = [Tick new];
	NSRunLoop *rl = [NSRunLoop currentRunLoop];
	NSDate *past = [NSDate distantPast];
	double start = now_ns();
	for (long i = 0; i < n; i++) {
		NSAutoreleasePool *p = [NSAutoreleasePool new];
		NSTimer *tm = [[NSTimer alloc] initWithFireDate:past interval:0 target:t selector:@selector(tick:) userInfo:nil repeats:NO];
		[rl addTimer:tm forMode:@"HopBench"];
		[tm release];
		[rl runMode:@"HopBench" beforeDate:past]; /* fires it, and lets it go */
		[p release];
	}
	double ns = (now_ns() - start) / n;
	printf("%.1f ns per timer\n", ns);
	[pool release];
	return 0;
}
