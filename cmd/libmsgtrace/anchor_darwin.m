/* An empty +load, so that this image has Objective-C metadata and a +load method (a class in
 * __objc_nlclslist). dyld has the Objective-C runtime run an image's +load methods (load_images)
 * right before that image's initializers, and objc4 attaches the categories of the images loaded
 * at launch in the first load_images after it registered with dyld: of any image with
 * Objective-C metadata (objc4-781 to 876), of an image with a +load (906 on; before 781 they were
 * attached when mapped). With this image's own, they are attached before ctor.c's constructor
 * installs: an app's categories (their +load among them) are in the method lists the install
 * reads, as their classes' own methods are. Without it they may be attached only in the app's own
 * load_images, which reads the +load IMPs in the same lock hold: untraced. The class is a root
 * class with no other method; nothing sends it a message. */
__attribute__((objc_root_class, visibility("hidden")))
@interface MsgtraceLoadAnchor {
	Class isa;
}
@end

@implementation MsgtraceLoadAnchor
+ (void)load {
}
@end
