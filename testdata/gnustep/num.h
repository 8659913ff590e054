/* Num, a boxed int that compares by value: the class whose -compare: (calling -value)
 * -[NSMutableArray sortUsingSelector:] calls back in sortapp.m and startup.m. */
#import <Foundation/Foundation.h>

@interface Num : NSObject {
	int v;
}
- (id)initWithValue:(int)x;
- (int)value;
- (NSComparisonResult)compare:(Num *)o;
@end

@implementation Num
- (id)initWithValue:(int)x {
	if ((self = [super init]))
		v = x;
	return self;
}
- (int)value {
	return v;
}
- (NSComparisonResult)compare:(Num *)o {
	int w = [o value];
	return v < w ? NSOrderedAscending : v > w ? NSOrderedDescending : NSOrderedSame;
}
@end
