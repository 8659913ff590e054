/* Classes for the objc package's test, compiled with gcc -x objective-c against GNU libobjc:
 * a root class, a subclass, instance and class methods. */
#include <objc/objc.h>
#include <objc/runtime.h>

@interface Shape {
	Class isa;
}
+ (id)make;
- (int)sides;
@end

@implementation Shape
+ (id)make { return class_createInstance(self, 0); }
- (int)sides { return 0; }
@end

@interface Square : Shape
- (int)sides;
@end

@implementation Square
- (int)sides { return 4; }
@end

/* one real object for the test to ask its class of */
id make_square(void) { return [Square make]; }
