/* A plugin launch.m dlopens (from main, or from a +load): its +load runs while its module
 * registers, inside dlopen. */
#import <Foundation/Foundation.h>
#include <unistd.h>

@interface LPlugin : NSObject
+ (void)warm;
- (id)answer;
@end

@implementation LPlugin
+ (void)load {
	[self warm];
}
+ (void)warm {
	usleep(2000);
}
- (id)answer {
	return (id)(intptr_t)42;
}
@end
