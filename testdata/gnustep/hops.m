/* Work handed to other threads and to later, each way gnustep-base has (the async hops the
 * tracer links: hops.c): a worker NSThread started by detachNewThreadSelector:, then
 * performSelector:onThread: (waitUntilDone: NO and YES), an NSOperationQueue operation,
 * performSelector:withObject:afterDelay:, a repeating NSTimer and an NSNotificationQueue post.
 * Each work item is an app method named after the call that enqueued it; the program waits for
 * every one (no timing) and prints what ran. Built with gcc (no blocks: addOperationWithBlock:
 * is addOperation: of an NSBlockOperation, the same hook). */
#import <Foundation/Foundation.h>
#include <unistd.h>

@interface Worker : NSObject {
@public
	NSConditionLock *state; /* 0 starting, 1 its run loop runs, 2 stopped */
	NSThread *thread;
	volatile int stop;
}
- (void)loop:(id)arg;
- (void)performed:(id)arg;
- (void)performedWait:(id)arg;
- (void)stop:(id)arg;
- (void)operated:(id)arg;
@end

@interface App : NSObject {
@public
	Worker *w;
	NSOperationQueue *queue;
	int delayed, ticks, noted;
}
- (void)startWorker;
- (void)schedulePerform;
- (void)schedulePerformWait;
- (void)scheduleOperation;
- (void)scheduleDelayed;
- (void)scheduleTimer;
- (void)scheduleNote;
- (void)stopWorker;
@end

@implementation Worker
- (void)loop:(id)arg {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	NSRunLoop *rl = [NSRunLoop currentRunLoop];
	thread = [[NSThread currentThread] retain]; /* outlives the thread: stopWorker asks it */
	[thread setName:@"worker"];
	/* a far timer keeps the run loop running until stop: */
	[rl addTimer:[[[NSTimer alloc] initWithFireDate:[NSDate distantFuture] interval:0 target:self
					       selector:@selector(stop:) userInfo:nil repeats:NO] autorelease]
	     forMode:NSDefaultRunLoopMode];
	[state lock];
	[state unlockWithCondition:1];
	while (!stop)
		[rl runMode:NSDefaultRunLoopMode beforeDate:[NSDate distantFuture]];
	[state lock];
	[state unlockWithCondition:2];
	[pool release];
}
- (void)performed:(id)arg {
	printf("performed on %s\n", [[[NSThread currentThread] name] UTF8String]);
}
- (void)performedWait:(id)arg {
	printf("performedWait on %s\n", [[[NSThread currentThread] name] UTF8String]);
}
- (void)stop:(id)arg {
	stop = 1;
}
- (void)operated:(id)arg {
	printf("operated\n");
}
@end

@implementation App
- (void)startWorker {
	w = [Worker new];
	w->state = [[NSConditionLock alloc] initWithCondition:0];
	[NSThread detachNewThreadSelector:@selector(loop:) toTarget:w withObject:nil];
	[w->state lockWhenCondition:1];
	[w->state unlock];
}
- (void)schedulePerform {
	[w performSelector:@selector(performed:) onThread:w->thread withObject:nil waitUntilDone:NO];
}
- (void)schedulePerformWait {
	[w performSelector:@selector(performedWait:) onThread:w->thread withObject:nil waitUntilDone:YES];
}
- (void)scheduleOperation {
	queue = [NSOperationQueue new];
	NSInvocationOperation *op = [[NSInvocationOperation alloc] initWithTarget:w selector:@selector(operated:) object:nil];
	[queue addOperation:op];
	[op release];
}
- (void)scheduleDelayed {
	[self performSelector:@selector(delayedRan:) withObject:nil afterDelay:0.001];
}
- (void)delayedRan:(id)arg {
	delayed = 1;
	printf("delayed\n");
}
- (void)scheduleTimer {
	[NSTimer scheduledTimerWithTimeInterval:0.001 target:self selector:@selector(ticked:) userInfo:nil repeats:YES];
}
- (void)ticked:(NSTimer *)t {
	if (++ticks == 2)
		[t invalidate];
	printf("ticked\n");
}
- (void)scheduleNote {
	[[NSNotificationCenter defaultCenter] addObserver:self selector:@selector(noted:) name:@"HopNote" object:self];
	[[NSNotificationQueue defaultQueue] enqueueNotification:[NSNotification notificationWithName:@"HopNote" object:self]
						   postingStyle:NSPostASAP];
}
- (void)noted:(NSNotification *)n {
	noted = 1;
	printf("noted\n");
}
- (void)stopWorker {
	[w performSelector:@selector(stop:) onThread:w->thread withObject:nil waitUntilDone:NO];
	[w->state lockWhenCondition:2];
	[w->state unlock];
	/* -[Worker loop:] and -[NSThread main] return after that: wait for the thread to be done */
	while (![w->thread isFinished])
		usleep(1000);
}
@end

int main(int argc, char **argv) {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	App *app = [App new];
	[app startWorker];
	[app schedulePerform];
	[app schedulePerformWait];
	[app scheduleOperation];
	[app->queue waitUntilAllOperationsAreFinished];
	[app scheduleDelayed];
	[app scheduleTimer];
	[app scheduleNote];
	while (!app->delayed || app->ticks < 2 || !app->noted)
		[[NSRunLoop currentRunLoop] runMode:NSDefaultRunLoopMode beforeDate:[NSDate dateWithTimeIntervalSinceNow:0.1]];
	[app stopWorker];
	printf("done\n");
	[pool release];
	return 0;
}
