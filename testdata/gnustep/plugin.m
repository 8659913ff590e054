/* A shared object sortapp dlopens (mode "plugin"): its class registers from its constructor. */
#import <Foundation/Foundation.h>

@interface Plugin : NSObject
- (id)answer;
@end

@implementation Plugin
- (id)answer {
	return (id)(intptr_t)42;
}
@end
