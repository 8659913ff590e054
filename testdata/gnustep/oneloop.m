/* A Foundation program (gnustep-base, gcc's GNU runtime) whose whole run is one long outermost
 * call, as a GUI application's is -[NSApplication run]: main sends [[App new] run:N] and
 * everything else happens under it. Each of the N turns does Foundation work that calls the
 * app back: an array of shapes (a class hierarchy whose methods call super) sorted with the
 * app's comparator (-[NSArray sortedArrayUsingSelector:] -> -[Shape compareArea:]), a
 * dictionary of them sorted by value (-keysSortedByValueUsingSelector:) and walked with an
 * enumerator, -makeObjectsPerformSelector:withObject:, and strings built with %@ (Foundation
 * calls the app's -description, which calls super's). With a second argument M > 0, a second
 * thread (registered with gnustep-base) does M turns of the same under its own single call
 * (-[Worker work:]) while the main thread runs, and run: joins it at the end: the worker has
 * returned from every call, its exit included, before main prints (an NSThread signalling a
 * condition from inside its call could still be in it at exit: a trace with open calls).
 *
 *	oneloop N [M]	prints "oneloop: main N turns, sum S; worker M turns, sum T"
 *
 * The sums depend on N and M only: a traced run prints what an untraced one does. Under
 * MSGTRACE_METHODS=all a turn is about 3,300 calls (cmd/libmsgtrace/bigrun_linux_test.go,
 * scripts/bench-convert.sh). */
#import <Foundation/Foundation.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

@interface Shape : NSObject {
	int ident;
	double side;
}
- (id)initWithIdent:(int)i side:(double)s;
- (int)ident;
- (double)side;
- (double)area;
- (NSComparisonResult)compareArea:(Shape *)o;
- (void)visit:(NSMutableArray *)acc;
@end

@implementation Shape
- (id)initWithIdent:(int)i side:(double)s {
	if ((self = [super init])) {
		ident = i;
		side = s;
	}
	return self;
}
- (int)ident {
	return ident;
}
- (double)side {
	return side;
}
- (double)area {
	return 0;
}
- (NSComparisonResult)compareArea:(Shape *)o {
	double a = [self area], b = [o area];
	if (a != b)
		return a < b ? NSOrderedAscending : NSOrderedDescending;
	return [self ident] < [o ident] ? NSOrderedAscending : [self ident] > [o ident] ? NSOrderedDescending : NSOrderedSame;
}
- (NSString *)description {
	return [NSString stringWithFormat:@"shape%d", ident];
}
- (void)visit:(NSMutableArray *)acc {
	if ([self area] > 50)
		[acc addObject:self];
}
@end

@interface Rect : Shape
@end
@implementation Rect
- (double)area {
	return [self side] * ([self side] + 1);
}
- (NSString *)description {
	return [@"rect-" stringByAppendingString:[super description]];
}
@end

@interface Square : Rect
@end
@implementation Square
- (id)initWithIdent:(int)i side:(double)s {
	return [super initWithIdent:i side:s + 0.5];
}
- (double)area {
	return [super area] - [self side];
}
- (NSString *)description {
	return [@"square-" stringByAppendingString:[super description]];
}
@end

@interface Circle : Shape
@end
@implementation Circle
- (double)area {
	return 3 * [self side] * [self side];
}
@end

@interface Work : NSObject
+ (long)turn:(int)i;
@end

@implementation Work
/* one turn: what Foundation does here calls the app back at every step */
+ (long)turn:(int)i {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	NSMutableArray *shapes = [NSMutableArray arrayWithCapacity:24];
	NSMutableDictionary *byName = [NSMutableDictionary dictionaryWithCapacity:24];
	for (int k = 0; k < 24; k++) {
		Class c = k % 3 == 0 ? [Rect class] : k % 3 == 1 ? [Square class] : [Circle class];
		Shape *s = [[[c alloc] initWithIdent:k side:(double)((k * 7 + i) % 11)] autorelease];
		[shapes addObject:s];
		[byName setObject:s forKey:[NSString stringWithFormat:@"k%02d", k]];
	}
	NSArray *sorted = [shapes sortedArrayUsingSelector:@selector(compareArea:)];
	NSArray *keys = [byName keysSortedByValueUsingSelector:@selector(compareArea:)];
	NSMutableArray *big = [NSMutableArray array];
	[sorted makeObjectsPerformSelector:@selector(visit:) withObject:big];
	NSMutableString *text = [NSMutableString stringWithCapacity:256];
	NSEnumerator *e = [byName keyEnumerator];
	NSString *key;
	long sum = 0;
	while ((key = [e nextObject]) != nil)
		sum += [[byName objectForKey:key] ident];
	for (NSUInteger k = 0; k < 4 && k < [big count]; k++)
		[text appendFormat:@"%@;", [big objectAtIndex:k]];
	sum += [text length] + [[sorted objectAtIndex:0] ident] * 3 + [[keys lastObject] length] + [big count];
	[pool release];
	return sum;
}
@end

@interface Worker : NSObject {
	int turns;
	long sum;
}
- (id)initWithTurns:(int)n;
- (void)work:(id)unused;
- (long)sum;
@end

@implementation Worker
- (id)initWithTurns:(int)n {
	if ((self = [super init]))
		turns = n;
	return self;
}
- (void)work:(id)unused {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	for (int i = 0; i < turns; i++)
		sum += [Work turn:i + 1000];
	[pool release];
}
- (long)sum {
	return sum;
}
@end

/* the worker thread: registered with gnustep-base for its life, one call to -[Worker work:] */
static void *worker_main(void *w) {
	GSRegisterCurrentThread();
	[(Worker *)w work:nil];
	GSUnregisterCurrentThread();
	return NULL;
}

@interface App : NSObject
- (void)run:(int)n worker:(int)m;
@end

@implementation App
- (void)run:(int)n worker:(int)m {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	Worker *w = nil;
	pthread_t worker;
	long sum = 0;
	int i = 0;
	/* gnustep-base 1.28 is not safe when two threads make their first use of its classes at
	 * once (a -[NSMutableArray arrayWithCapacity:] crashes in objc_msg_lookup on an object
	 * whose class is NULL, while the other thread runs +[GSMutableArray initialize]: 5 runs
	 * of 300 untraced with a worker started cold, more when tracing slows +initialize down):
	 * the main thread does its first turn before it starts the worker, as an application
	 * has run its launch before it starts threads. */
	if (n > 0)
		sum += [Work turn:i++];
	if (m > 0) {
		w = [[Worker alloc] initWithTurns:m];
		if (pthread_create(&worker, NULL, worker_main, w) != 0) {
			fprintf(stderr, "oneloop: pthread_create failed\n");
			exit(1);
		}
	}
	for (; i < n; i++)
		sum += [Work turn:i];
	long wsum = 0;
	if (w) {
		pthread_join(worker, NULL);
		wsum = [w sum];
	}
	printf("oneloop: main %d turns, sum %ld; worker %d turns, sum %ld\n", n, sum, m, wsum);
	[pool release];
}
@end

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	int m = argc > 2 ? atoi(argv[2]) : 0;
	[[App new] run:n worker:m];
	return 0;
}
