/* The program `make demo` traces: a little photo-library app on gnustep-base (gcc's GNU
 * runtime). -[App run] drives an NSRunLoop; an NSTimer fires a frame every 16 ms: import a batch
 * of photos into Foundation collections, lay out the newest sorted by -[Photo compareByScore:]
 * (Foundation's sort calls back into the app), render a few rows. A worker NSThread ("indexer")
 * hashes the names meanwhile and compacts its index: long calls, not on the main thread. Once,
 * in frame HITCH_FRAME, -[Library loadThumbnailCache] blocks the main thread for BLOCK_MS ms (a
 * synchronous read): the hitch `machobind report` finds.
 *
 *   -DBLOCK_MS=N   how long the main thread blocks (default 40)
 *   -DFRAMES=N     frames to draw (default 24)
 */
#define _GNU_SOURCE /* pthread_setname_np */
#import <Foundation/Foundation.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#ifndef BLOCK_MS
#define BLOCK_MS 40
#endif
#ifndef FRAMES
#define FRAMES 24
#endif
#define HITCH_FRAME (FRAMES / 2)

@interface Photo : NSObject {
	NSString *name;
	double score;
	NSMutableDictionary *tags;
}
+ (Photo *)photoNamed:(NSString *)n score:(double)s;
- (NSString *)name;
- (double)score;
- (void)tag:(NSString *)t;
- (NSComparisonResult)compareByScore:(Photo *)other;
@end

@implementation Photo
+ (Photo *)photoNamed:(NSString *)n score:(double)s {
	Photo *p = [[[self alloc] init] autorelease];
	p->name = [n copy];
	p->score = s;
	p->tags = [[NSMutableDictionary alloc] init];
	return p;
}
- (void)dealloc {
	[name release];
	[tags release];
	[super dealloc];
}
- (NSString *)name {
	return name;
}
- (double)score {
	return score;
}
- (void)tag:(NSString *)t {
	NSNumber *n = [tags objectForKey:t];
	[tags setObject:[NSNumber numberWithInt:[n intValue] + 1] forKey:t];
}
/* best first, then by name: Foundation's sort sends this to the app's objects */
- (NSComparisonResult)compareByScore:(Photo *)o {
	double a = [self score], b = [o score];
	if (a != b)
		return a > b ? NSOrderedAscending : NSOrderedDescending;
	return [name compare:[o name]];
}
@end

@interface Library : NSObject {
	NSMutableArray *photos;
	NSMutableDictionary *byTag;
	NSData *thumbnails;
}
- (void)importBatch:(int)batch count:(int)n;
- (NSArray *)newest:(int)n;
- (NSArray *)names;
- (void)loadThumbnailCache;
@end

@implementation Library
- (id)init {
	if ((self = [super init])) {
		photos = [[NSMutableArray alloc] init];
		byTag = [[NSMutableDictionary alloc] init];
	}
	return self;
}
- (void)importBatch:(int)batch count:(int)n {
	static NSString *tags[] = {@"beach", @"city", @"family", @"food", @"night"};
	for (int i = 0; i < n; i++) {
		int k = batch * n + i;
		Photo *p = [Photo photoNamed:[NSString stringWithFormat:@"IMG_%04d.jpg", k] score:(double)((k * 7919) % 1000) / 10];
		NSString *t = tags[k % 5];
		[p tag:t];
		[photos addObject:p];
		NSMutableArray *list = [byTag objectForKey:t];
		if (list == nil) {
			list = [NSMutableArray array];
			[byTag setObject:list forKey:t];
		}
		[list addObject:p];
	}
}
- (NSArray *)newest:(int)n {
	NSUInteger c = [photos count], k = c < (NSUInteger)n ? c : (NSUInteger)n;
	return [photos subarrayWithRange:NSMakeRange(c - k, k)];
}
- (NSArray *)names {
	NSMutableArray *a = [NSMutableArray array];
	for (Photo *p in photos)
		[a addObject:[p name]];
	return a;
}
/* The hitch: a synchronous read of the thumbnail cache on the main thread. */
- (void)loadThumbnailCache {
	usleep(BLOCK_MS * 1000);
	[thumbnails release];
	thumbnails = [[NSMutableData alloc] initWithLength:64 * 1024];
}
@end

@interface Indexer : NSObject {
	NSArray *names;
	volatile int done;
	unsigned long digest;
}
- (id)initWithNames:(NSArray *)n;
- (void)run:(id)arg;
- (unsigned long)hashName:(NSString *)n rounds:(int)r;
- (void)compact;
- (BOOL)isDone;
@end

@implementation Indexer
- (id)initWithNames:(NSArray *)n {
	if ((self = [super init]))
		names = [n copy];
	return self;
}
/* the worker thread's body */
- (void)run:(id)arg {
	NSAutoreleasePool *pool = [[NSAutoreleasePool alloc] init];
	pthread_setname_np(pthread_self(), "indexer");
	for (int pass = 0; pass < 4; pass++)
		for (NSString *n in names)
			digest ^= [self hashName:n rounds:200];
	[self compact];
	[pool release];
	done = 1;
}
- (unsigned long)hashName:(NSString *)n rounds:(int)r {
	const char *s = [n UTF8String];
	unsigned long h = 5381;
	for (int i = 0; i < r; i++)
		for (const char *c = s; *c; c++)
			h = h * 33 + (unsigned char)*c;
	return h;
}
/* long work off the main thread: listed by the report, never a hitch */
- (void)compact {
	usleep(2 * BLOCK_MS * 1000);
}
- (BOOL)isDone {
	return done;
}
@end

@interface App : NSObject {
	Library *library;
	Indexer *indexer;
	int frame;
	NSString *screen;
}
- (void)run;
- (void)tick:(NSTimer *)t;
- (void)frame:(int)i;
- (void)handleEvents:(int)i;
- (NSArray *)layout;
- (void)render:(NSArray *)rows;
@end

@implementation App
- (id)init {
	if ((self = [super init]))
		library = [[Library alloc] init];
	return self;
}
/* the run loop: a frame every 16 ms until FRAMES are drawn and the indexer is done */
- (void)run {
	[library importBatch:0 count:40];
	indexer = [[Indexer alloc] initWithNames:[library names]];
	[NSThread detachNewThreadSelector:@selector(run:) toTarget:indexer withObject:nil];
	NSTimer *t = [NSTimer scheduledTimerWithTimeInterval:1.0 / 60 target:self selector:@selector(tick:) userInfo:nil repeats:YES];
	NSRunLoop *rl = [NSRunLoop currentRunLoop];
	while (frame < FRAMES || ![indexer isDone])
		[rl runMode:NSDefaultRunLoopMode beforeDate:[NSDate dateWithTimeIntervalSinceNow:0.05]];
	[t invalidate];
}
- (void)tick:(NSTimer *)t {
	if (frame < FRAMES)
		[self frame:frame++];
}
- (void)frame:(int)i {
	NSAutoreleasePool *pool = [[NSAutoreleasePool alloc] init];
	[self handleEvents:i];
	if (i == HITCH_FRAME)
		[library loadThumbnailCache];
	[self render:[self layout]];
	[pool release];
}
- (void)handleEvents:(int)i {
	[library importBatch:i + 1 count:40];
}
- (NSArray *)layout {
	return [[library newest:200] sortedArrayUsingSelector:@selector(compareByScore:)];
}
- (void)render:(NSArray *)rows {
	NSMutableArray *lines = [NSMutableArray array];
	for (NSUInteger i = 0; i < 10 && i < [rows count]; i++) {
		Photo *p = [rows objectAtIndex:i];
		[lines addObject:[NSString stringWithFormat:@"%2lu %@ %5.1f", (unsigned long)i + 1, [p name], [p score]]];
	}
	[screen release];
	screen = [[lines componentsJoinedByString:@"\n"] retain];
}
- (NSString *)screen {
	return screen;
}
@end

int main(void) {
	NSAutoreleasePool *pool = [[NSAutoreleasePool alloc] init];
	App *app = [[App alloc] init];
	[app run];
	printf("%s\n", [[app screen] UTF8String]);
	[pool release];
	return 0;
}
