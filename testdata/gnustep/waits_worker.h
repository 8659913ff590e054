/* What waits.m and waits_apple.m share: the worker, an NSThread named "indexer" running an
 * Index's -run:, which holds a lock (or is about to signal) while the main thread waits. It says
 * so through a flag the main thread polls (no lock of its own, so that no other wait is
 * recorded). */
#import <Foundation/Foundation.h>
#include <unistd.h>

static volatile int holding; /* the worker holds the lock (or is about to signal) */
static volatile int about;   /* the main thread is about to wait: the worker holds on 40 ms from here */

/* The worker, holding: until the main thread is about to wait, then 40 ms (a wait of about
 * 40 ms however late the main thread gets there on a busy machine). */
static void hold(void) {
	while (!about)
		usleep(1000);
	usleep(40000);
}

@interface Index : NSObject
- (void)run:(id)arg;
- (void)compact;
- (void)produce;
@end

/* Starts the worker on ix. */
static void start_indexer(Index *ix) {
	NSThread *worker = [[NSThread alloc] initWithTarget:ix selector:@selector(run:) object:nil];
	[worker setName:@"indexer"];
	[worker start];
}
