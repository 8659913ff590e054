/* Contended waits with their holders (the library's waits.c), on gcc's runtime and gnustep-base,
 * in real threads. The main thread's -[App frame:] blocks about 40 ms while a worker NSThread
 * named "indexer" holds the lock inside -[Index compact]:
 *
 *   sync        @synchronized on a shared object (objc_sync_enter: a pthread mutex in libobjc)
 *   nslock      -[NSLock lock]
 *   condition   -[NSCondition wait], signalled by the worker's -[Index produce]
 *   uncontended -[App frame:] takes an NSLock nobody else wants a million times
 *   bench N     the costs: -[App bench:] takes a pthread mutex nobody else wants N million times,
 *               then waits N/10 million times on a condition with a time limit already past
 *               (a wait recorded every time); prints ns per lock and unlock, and per wait
 *
 * The worker takes the lock first and says so through a flag the main thread polls (no lock of
 * its own, so that no other wait is recorded), then holds it for the time the argument says.
 * Prints what it did (the same traced or not). */
#import <Foundation/Foundation.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include "waits_worker.h"

static id shared;            /* the @synchronized object */
static NSLock *lock;
static NSCondition *cond;
static int ready;
static const char *mode;

@implementation Index
- (void)run:(id)arg {
	(void)arg;
	if (strcmp(mode, "condition") == 0)
		[self produce];
	else
		[self compact];
}
- (void)compact {
	if (strcmp(mode, "sync") == 0) {
		@synchronized(shared) {
			holding = 1;
			hold();
		}
	} else {
		[lock lock];
		holding = 1;
		hold();
		[lock unlock];
	}
}
- (void)produce {
	holding = 1;
	hold();
	[cond lock];
	ready = 1;
	[cond signal];
	[cond unlock];
}
@end

@interface App : NSObject
- (int)frame:(int)n;
- (void)bench:(long)n;
- (void)scheduleIndex;
@end

static double now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

@implementation App
/* the worker is work this method hands over (a thread start: an async hop), so a wait on what
   the worker holds says who enqueued it */
- (void)scheduleIndex {
	start_indexer([Index new]);
}
- (int)frame:(int)n {
	if (strcmp(mode, "sync") == 0) {
		@synchronized(shared) {
			n++;
		}
	} else if (strcmp(mode, "nslock") == 0) {
		[lock lock];
		n++;
		[lock unlock];
	} else if (strcmp(mode, "condition") == 0) {
		[cond lock];
		while (!ready)
			[cond wait];
		[cond unlock];
		n++;
	} else {
		for (int i = 0; i < 1000000; i++) {
			[lock lock];
			n++;
			[lock unlock];
		}
	}
	return n;
}
- (void)bench:(long)n {
	static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	static volatile long sink;
	double t0 = now_ns();
	for (long i = 0; i < n; i++) {
		pthread_mutex_lock(&m);
		sink++;
		pthread_mutex_unlock(&m);
	}
	double t1 = now_ns();
	struct timespec past = {1, 0};
	pthread_mutex_lock(&m);
	for (long i = 0; i < n / 10; i++)
		pthread_cond_timedwait(&c, &m, &past);
	pthread_mutex_unlock(&m);
	double t2 = now_ns();
	printf("lock+unlock %.2f ns, timedwait %.1f ns\n", (t1 - t0) / n, (t2 - t1) / (n / 10));
}
@end

int main(int argc, char **argv) {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	mode = argc > 1 ? argv[1] : "sync";
	shared = [NSObject new];
	lock = [NSLock new];
	cond = [NSCondition new];
	App *app = [App new];
	if (strcmp(mode, "bench") == 0) {
		[app bench:(argc > 2 ? atol(argv[2]) : 1) * 1000000];
		[pool drain];
		return 0;
	}
	if (strcmp(mode, "uncontended") != 0) {
		[app scheduleIndex];
		while (!holding)
			usleep(1000);
		if (strcmp(mode, "condition") != 0)
			usleep(5000); /* well inside the worker's 40 ms */
	}
	about = 1;
	int n = [app frame:0];
	usleep(20000); /* the worker's last calls end before the exit */
	printf("waits %s: %d\n", mode, n);
	[pool drain];
	return 0;
}
