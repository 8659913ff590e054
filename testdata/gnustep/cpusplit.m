/* On-CPU vs off-CPU: a worker NSThread spins inside -[Spinner spin] until it has run SPIN_MS of
 * its own CPU time (CLOCK_THREAD_CPUTIME_ID: a busy machine makes the call longer, never its
 * running time shorter), while the main thread sleeps SLEEP_MS inside -[Sleeper nap]; then the
 * main thread waits for the worker (outside any method). Both calls are long enough to be the
 * report's long calls (a hitch on the main thread, a long call on the worker). Each thread makes
 * a traced call 20 ms before its long one (the drain samples a thread from its first traced
 * call on). Prints what it computed (the same traced or not). */
#import <Foundation/Foundation.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define SPIN_MS 60
#define SLEEP_MS 60

static volatile int worker_done;

static long long thread_cpu_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

@interface Spinner : NSObject
- (unsigned long)spin;
- (void)run:(id)arg;
@end

@implementation Spinner
- (unsigned long)spin {
	unsigned long x = 1;
	int k;
	long long until = thread_cpu_ns() + SPIN_MS * 1000000LL;
	while (thread_cpu_ns() < until)
		for (k = 0; k < 10000; k++)
			x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x & 1;
}
- (void)run:(id)arg {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	(void)arg;
	usleep(20000); /* off CPU before and after the spin */
	printf("spun %lu\n", [self spin] * 0);
	usleep(20000);
	[pool drain];
	worker_done = 1;
}
@end

@interface Sleeper : NSObject
- (int)ready;
- (int)nap;
@end

@implementation Sleeper
- (int)ready {
	return 1;
}
- (int)nap {
	usleep(SLEEP_MS * 1000);
	return 1;
}
@end

int main(void) {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	Spinner *s = [Spinner new];
	Sleeper *z = [Sleeper new];
	[z ready]; /* the main thread's first traced call: its CPU time is sampled from here on */
	[NSThread detachNewThreadSelector:@selector(run:) toTarget:s withObject:nil];
	usleep(20000);
	int napped = [z nap];
	while (!worker_done)
		usleep(1000);
	usleep(30000); /* the drain samples the threads after both calls */
	printf("napped %d\n", napped);
	[pool drain];
	return 0;
}
