/* The executable of an NSBundle launch.m loads at run time (-[NSBundle load]): its +load runs
 * while its module registers, inside gnustep-base's loading. */
#import <Foundation/Foundation.h>
#include <unistd.h>

@interface LBundle : NSObject
+ (void)warm;
- (id)answer;
@end

@implementation LBundle
+ (void)load {
	[self warm];
}
+ (void)warm {
	usleep(2000);
}
- (id)answer {
	return (id)(intptr_t)7;
}
@end
