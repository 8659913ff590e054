/* Many threads that run and sleep by turns, for the cost of sampling their CPU time
 * (scripts/bench-cpu.sh): CPU_THREADS NSThreads (64 when unset), each CPU_ROUNDS rounds (100)
 * of 200 sends of -[Work step:] then a 2 ms sleep, so that every thread's counters move between
 * two samples. Prints the sum of what the threads computed (the same traced or not). */
#import <Foundation/Foundation.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int rounds;
static volatile int done;
static unsigned long sums[1024];

@interface Work : NSObject
- (unsigned long)step:(unsigned long)x;
- (void)run:(NSNumber *)index;
@end

@implementation Work
- (unsigned long)step:(unsigned long)x {
	return x * 2862933555777941757UL + 3037000493UL;
}
- (void)run:(NSNumber *)index {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	unsigned long x = (unsigned long)[index intValue];
	int r, k;
	for (r = 0; r < rounds; r++) {
		for (k = 0; k < 200; k++)
			x = [self step:x];
		usleep(2000);
	}
	sums[[index intValue]] = x & 0xff;
	[pool drain];
	__sync_fetch_and_add(&done, 1);
}
@end

static int env_int(const char *name, int def, int max) {
	const char *v = getenv(name);
	int n = v ? atoi(v) : def;
	return n < 1 ? def : n > max ? max : n;
}

int main(void) {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	int threads = env_int("CPU_THREADS", 64, 1024), i;
	rounds = env_int("CPU_ROUNDS", 100, 1000000);
	Work *w = [Work new];
	for (i = 0; i < threads; i++)
		[NSThread detachNewThreadSelector:@selector(run:) toTarget:w withObject:[NSNumber numberWithInt:i]];
	while (done < threads)
		usleep(1000);
	unsigned long sum = 0;
	for (i = 0; i < threads; i++)
		sum += sums[i];
	printf("%d threads, %d rounds: %lu\n", threads, rounds, sum);
	[pool drain];
	return 0;
}
