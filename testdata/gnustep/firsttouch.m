/* Threads that first touch Foundation before the main thread does (gnustep-base on gcc's
 * runtime), for make bench-firsttouch (scripts/bench-firsttouch.sh) and a test of the library.
 *
 * FIRSTTOUCH_THREADS threads (default 4) start together (a barrier) and each makes an
 * autorelease pool, a mutable array, a string, a mutable dictionary and an object of the app's
 * own class MTFirstTouch, whose +initialize adds methods at run time (class_addMethod), as
 * gnustep-base's +initialize methods add their behaviours' methods. When no thread touched
 * Foundation before, gnustep-base crashes now and then, untraced: the thread that sends the first
 * message to NSMutableArray runs +[NSArray initialize] (gcc's runtime holds its lock meanwhile),
 * which asks for [NSMutableArray class] before it sets the class NSMutableArray's instances are
 * made of (GSMutableArray, set after +[GSArray initialize] and +[GSMutableArray initialize] ran);
 * the runtime installs NSMutableArray's class methods as soon as that nested +initialize returns,
 * so a thread that sends [NSMutableArray array] in between gets no lock to wait for, makes an
 * object whose class is NULL and dies in objc_msg_lookup (SIGSEGV). The longer those two
 * +initialize methods take, the more runs crash: the benchmark counts them, traced and not.
 *
 * The pools are made with alloc and init, not +new: gnustep-base 1.28's +[NSAutoreleasePool new]
 * sets two static IMPs on its first call, one after the other, and a second thread that finds
 * the first set calls the second while it is still NULL (a crash at address 0): another race of
 * gnustep-base's own, kept out of the count.
 *
 * FIRSTTOUCH_MAIN=1: the main thread touches the same classes before it starts the threads (as
 * an application that finished launching does): nothing to race for, for a test that must pass
 * every time. Prints "firsttouch: N threads, N touches" at the end. */
#import <Foundation/Foundation.h>
#include <objc/runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_THREADS 64

/* The app's class: its methods are added by its +initialize. */
@interface MTFirstTouch : NSObject
@end

static long touches;

static void mt_touch(id self, SEL cmd) {
	(void)self, (void)cmd;
	__atomic_add_fetch(&touches, 1, __ATOMIC_RELAXED);
}

static long mt_touches(id self, SEL cmd) {
	(void)self, (void)cmd;
	return __atomic_load_n(&touches, __ATOMIC_RELAXED);
}

@implementation MTFirstTouch
+ (void)initialize {
	if (self != [MTFirstTouch class])
		return;
	class_addMethod(self, @selector(touch), (IMP)mt_touch, "v@:");
	class_addMethod(object_getClass(self), @selector(touches), (IMP)mt_touches, "l@:");
}
@end

/* What each thread does first: Foundation's collections and strings, then the app's class. */
static void first_touch(long i) {
	NSAutoreleasePool *pool = [[NSAutoreleasePool alloc] init];
	NSMutableArray *a = [NSMutableArray array];
	[a addObject:[NSString stringWithFormat:@"thread %ld", i]];
	NSMutableDictionary *d = [NSMutableDictionary dictionary];
	[d setObject:a forKey:@"strings"];
	id t = [[MTFirstTouch new] autorelease];
	[t performSelector:@selector(touch)];
	[pool drain];
}

static pthread_barrier_t start;

static void *worker(void *arg) {
	pthread_barrier_wait(&start);
	first_touch((long)arg);
	return NULL;
}

int main(void) {
	const char *s = getenv("FIRSTTOUCH_THREADS");
	int n = s ? atoi(s) : 4;
	if (n < 1 || n > MAX_THREADS)
		n = 4;
	if (getenv("FIRSTTOUCH_MAIN")) { /* Foundation touched here first: no race */
		NSAutoreleasePool *pool = [[NSAutoreleasePool alloc] init];
		[[NSMutableArray array] addObject:[NSString stringWithFormat:@"main"]];
		[NSMutableDictionary dictionary];
		[pool drain];
	}
	pthread_t t[MAX_THREADS];
	pthread_barrier_init(&start, NULL, (unsigned)n);
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)i) != 0) {
			perror("pthread_create");
			return 1;
		}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	long got = (long)[MTFirstTouch performSelector:@selector(touches)];
	printf("firsttouch: %d threads, %ld touches\n", n, got);
	return got == n ? 0 : 1;
}
