/* Threads whose first message is +[NSAutoreleasePool new] (gnustep-base on gcc's runtime), for
 * make bench-firsttouch (scripts/bench-firsttouch.sh): a race of gnustep-base's own, counted
 * traced and untraced.
 *
 * FIRSTTOUCH_THREADS threads (default 4) start together (a barrier) and each makes and drains a
 * pool with +new. gnustep-base 1.28's +[NSAutoreleasePool new] fills two static IMPs on its
 * first call, one after the other (allocImp from -methodForSelector:, then initImp from
 * +instanceMethodForSelector:, which installs the class's dispatch table under the runtime's
 * lock); a second thread that finds allocImp set calls it, then initImp while it is still NULL
 * and dies at address 0 (SIGSEGV). The first thread's window between the two stores holds a
 * turn at the runtime's lock, which the other threads, just released from waiting for
 * +[NSObject initialize], contend for: how often it crashes moves with how often the threads
 * are preempted there. Prints "poolnew: N threads" at the end. */
#import <Foundation/Foundation.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_THREADS 64

static pthread_barrier_t start;

static void *worker(void *arg) {
	(void)arg;
	pthread_barrier_wait(&start);
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	[pool drain];
	return NULL;
}

int main(void) {
	const char *s = getenv("FIRSTTOUCH_THREADS");
	int n = s ? atoi(s) : 4;
	if (n < 1 || n > MAX_THREADS)
		n = 4;
	pthread_t t[MAX_THREADS];
	pthread_barrier_init(&start, NULL, (unsigned)n);
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)i) != 0) {
			perror("pthread_create");
			return 1;
		}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("poolnew: %d threads\n", n);
	return 0;
}
