/* Contended waits with their holders (the library's waits.c), on gcc's runtime and gnustep-base,
 * in real threads. The main thread's -[App frame:] blocks about 40 ms while a worker NSThread
 * named "indexer" holds the lock inside -[Index compact]:
 *
 *   sync        @synchronized on a shared object (objc_sync_enter: a pthread mutex in libobjc)
 *   nslock      -[NSLock lock]
 *   condition   -[NSCondition wait], signalled by the worker's -[Index produce]
 *   uncontended -[App frame:] takes an NSLock nobody else wants a million times
 *
 * The worker takes the lock first and says so through a flag the main thread polls (no lock of
 * its own, so that no other wait is recorded), then holds it for the time the argument says.
 * Prints what it did (the same traced or not). */
#import <Foundation/Foundation.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile int holding; /* the worker holds the lock (or, for condition, is about to signal) */
static id shared;            /* the @synchronized object */
static NSLock *lock;
static NSCondition *cond;
static int ready;
static const char *mode;

@interface Index : NSObject
- (void)run:(id)arg;
- (void)compact;
- (void)produce;
@end

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
			usleep(40000);
		}
	} else {
		[lock lock];
		holding = 1;
		usleep(40000);
		[lock unlock];
	}
}
- (void)produce {
	holding = 1;
	usleep(40000);
	[cond lock];
	ready = 1;
	[cond signal];
	[cond unlock];
}
@end

@interface App : NSObject
- (int)frame:(int)n;
@end

@implementation App
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
@end

int main(int argc, char **argv) {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	mode = argc > 1 ? argv[1] : "sync";
	shared = [NSObject new];
	lock = [NSLock new];
	cond = [NSCondition new];
	App *app = [App new];
	if (strcmp(mode, "uncontended") != 0) {
		Index *ix = [Index new];
		NSThread *worker = [[NSThread alloc] initWithTarget:ix selector:@selector(run:) object:nil];
		[worker setName:@"indexer"];
		[worker start];
		while (!holding)
			usleep(1000);
		if (strcmp(mode, "condition") != 0)
			usleep(5000); /* well inside the worker's 40 ms */
	}
	int n = [app frame:0];
	usleep(20000); /* the worker's last calls end before the exit */
	printf("waits %s: %d\n", mode, n);
	[pool drain];
	return 0;
}
