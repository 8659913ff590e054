/* Two builds of one program for `machobind diff` (gnustep-base, gcc's GNU runtime): -DSLOWER
 * does eight times the work inside -[Parser parse:]'s own body and changes nothing else: the
 * same methods are called the same number of times, so only that method's self time grows
 * (and the total time of the methods around it).
 *
 * The program builds LINES records as strings, parses each into numbers (Tokenizer, Parser),
 * keeps them in Foundation collections, sorts them with a comparator method Foundation calls
 * back, and prints a checksum (the same in both builds). Nearly all of its time is
 * -[Parser parse:]'s own: the other methods take well under a millisecond, so the noise of a
 * loaded machine (a preempted run) rarely moves them past diff's 1 ms floor. */
#import <Foundation/Foundation.h>
#include <stdio.h>

#ifndef LINES
#define LINES 100
#endif
#ifdef SLOWER
#define ROUNDS 9600
#else
#define ROUNDS 1200
#endif

@interface Record : NSObject {
	long key;
	NSString *label;
}
- (id)initWithKey:(long)k label:(NSString *)l;
- (long)key;
- (NSComparisonResult)compareKey:(Record *)o;
@end

@implementation Record
- (id)initWithKey:(long)k label:(NSString *)l {
	if ((self = [super init])) {
		key = k;
		label = [l copy];
	}
	return self;
}
- (void)dealloc {
	[label release];
	[super dealloc];
}
- (long)key {
	return key;
}
- (NSComparisonResult)compareKey:(Record *)o {
	long a = key, b = [o key];
	return a < b ? NSOrderedAscending : a > b ? NSOrderedDescending : NSOrderedSame;
}
@end

@interface Tokenizer : NSObject
- (NSArray *)fields:(NSString *)line;
@end

@implementation Tokenizer
- (NSArray *)fields:(NSString *)line {
	return [line componentsSeparatedByString:@","];
}
@end

@interface Parser : NSObject {
	Tokenizer *tok;
}
- (Record *)parse:(NSString *)line;
@end

@implementation Parser
- (id)init {
	if ((self = [super init]))
		tok = [[Tokenizer alloc] init];
	return self;
}
/* the method -DSLOWER makes slower: a checksum over the line, ROUNDS times, in its own body */
- (Record *)parse:(NSString *)line {
	NSArray *f = [tok fields:line];
	const char *s = [line UTF8String];
	volatile unsigned long h = 0;
	for (int r = 0; r < ROUNDS; r++)
		for (const char *c = s; *c; c++)
			h = h * 31 + (unsigned char)*c;
	long k = [[f objectAtIndex:1] intValue] * 1000L + (long)(h % 7 == 7);
	return [[[Record alloc] initWithKey:k label:[f objectAtIndex:2]] autorelease];
}
@end

@interface App : NSObject
- (NSArray *)makeLines;
- (long)run;
@end

@implementation App
- (NSArray *)makeLines {
	NSMutableArray *a = [NSMutableArray arrayWithCapacity:LINES];
	for (int i = 0; i < LINES; i++)
		[a addObject:[NSString stringWithFormat:@"%d,%d,label-%05d,%s", i, (i * 7919) % LINES, i, "payload-payload-payload"]];
	return a;
}
- (long)run {
	NSAutoreleasePool *pool = [[NSAutoreleasePool alloc] init];
	Parser *p = [[Parser alloc] init];
	NSMutableArray *records = [NSMutableArray array];
	NSMutableDictionary *byKey = [NSMutableDictionary dictionary];
	for (NSString *line in [self makeLines]) {
		Record *r = [p parse:line];
		[records addObject:r];
		[byKey setObject:r forKey:[NSNumber numberWithLong:[r key]]];
	}
	[records sortUsingSelector:@selector(compareKey:)];
	long sum = 0;
	for (NSUInteger i = 0; i < [records count]; i += 97)
		sum += [(Record *)[records objectAtIndex:i] key] * (long)i;
	sum += (long)[byKey count];
	[p release];
	[pool release];
	return sum;
}
@end

int main(void) {
	NSAutoreleasePool *pool = [[NSAutoreleasePool alloc] init];
	/* Foundation's first sort reads the user defaults (files: tens of ms, and noisy): done
	 * here, outside the app's methods */
	[[NSArray arrayWithObjects:@"b", @"a", nil] sortedArrayUsingSelector:@selector(compare:)];
	App *app = [[App alloc] init];
	printf("checksum %ld\n", [app run]);
	[pool release];
	return 0;
}
