/* Apple's blocking calls, on the stand-in of testdata/waits/standin_dispatch.c (linked): the main
 * thread's -[App frame:] blocks while the worker NSThread "indexer" holds or signals inside its
 * method, as waits.m does with pthreads:
 *   unfair     os_unfair_lock_lock; the worker holds the lock in -[Index compact]
 *   sync       dispatch_sync_f onto a serial queue the worker keeps busy in -[Index compact]
 *   semaphore  dispatch_semaphore_wait; the worker signals in -[Index produce]
 *   group      dispatch_group_wait; the worker leaves the group in -[Index produce]
 * Prints what it did (the same traced or not). */
#import <Foundation/Foundation.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "waits_worker.h"

typedef uint32_t os_unfair_lock;
void os_unfair_lock_lock(os_unfair_lock *);
void os_unfair_lock_unlock(os_unfair_lock *);
void *standin_queue_create(void);
void dispatch_sync_f(void *, void *, void (*)(void *));
void *dispatch_semaphore_create(long);
long dispatch_semaphore_wait(void *, uint64_t);
long dispatch_semaphore_signal(void *);
void *dispatch_group_create(void);
void dispatch_group_enter(void *);
void dispatch_group_leave(void *);
long dispatch_group_wait(void *, uint64_t);
#define FOREVER (~0ull)

static os_unfair_lock ulock;
static void *queue, *sema, *group;
static const char *mode;

static int ran;

static void busy(void *arg) {
	(void)arg;
	holding = 1;
	hold();
}
static void work(void *arg) { *(int *)arg += 1; }

@implementation Index
- (void)run:(id)arg {
	(void)arg;
	if (strcmp(mode, "semaphore") == 0 || strcmp(mode, "group") == 0)
		[self produce];
	else
		[self compact];
}
- (void)compact {
	if (strcmp(mode, "unfair") == 0) {
		os_unfair_lock_lock(&ulock);
		busy(NULL);
		os_unfair_lock_unlock(&ulock);
	} else {
		dispatch_sync_f(queue, NULL, busy);
	}
}
- (void)produce {
	holding = 1;
	hold();
	if (strcmp(mode, "semaphore") == 0)
		dispatch_semaphore_signal(sema);
	else
		dispatch_group_leave(group);
}
@end

@interface App : NSObject
- (int)frame:(int)n;
@end

@implementation App
- (int)frame:(int)n {
	if (strcmp(mode, "unfair") == 0) {
		os_unfair_lock_lock(&ulock);
		n++;
		os_unfair_lock_unlock(&ulock);
	} else if (strcmp(mode, "sync") == 0) {
		dispatch_sync_f(queue, &ran, work);
		n += ran;
	} else if (strcmp(mode, "semaphore") == 0) {
		n += dispatch_semaphore_wait(sema, FOREVER) == 0;
	} else {
		n += dispatch_group_wait(group, FOREVER) == 0;
	}
	return n;
}
@end

int main(int argc, char **argv) {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	mode = argc > 1 ? argv[1] : "unfair";
	queue = standin_queue_create();
	sema = dispatch_semaphore_create(0);
	group = dispatch_group_create();
	dispatch_group_enter(group);
	App *app = [App new];
	start_indexer([Index new]);
	while (!holding)
		usleep(1000);
	usleep(5000);
	about = 1;
	int n = [app frame:0];
	usleep(20000);
	printf("apple waits %s: %d\n", mode, n);
	[pool drain];
	return 0;
}
