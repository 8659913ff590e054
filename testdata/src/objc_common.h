#pragma once
/* Shared declarations of the Objective-C fixtures: an own root class (no Foundation, no SDK
 * headers) so that every message below is a real objc_msgSend / objc_msgSendSuper2 call. */
int printf(const char *, ...);
int helper_value(int x);
double helper_scale(double v);
extern __thread int helper_tls;

typedef struct { double x, y, w, h; } Rect;

__attribute__((objc_root_class))
@interface Root {
	Class isa;
}
+ (id)alloc;
+ (id)new;
- (id)init;
- (int)value;
- (double)ratio;
- (Rect)frame;
- (long double)precise;
- (_Complex long double)phase;
@end

@interface Child : Root
- (int)value;
- (double)ratio;
- (Rect)frame;
@end
