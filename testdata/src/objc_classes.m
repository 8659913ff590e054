#include "objc_common.h"

@implementation Root
+ (id)alloc { return 0; }
+ (id)new { return [[self alloc] init]; }
- (id)init { return self; }
- (int)value { return 1; }
- (double)ratio { return 0.5; }
- (Rect)frame { Rect r = {1, 2, 3, 4}; return r; }
- (long double)precise { return 0.25L; }
- (_Complex long double)phase { return 1.0L; }
@end

@implementation Child
- (int)value { return [super value] + helper_value(2); }
- (double)ratio { return [super ratio] * helper_scale(2.0); }
- (Rect)frame { Rect r = [super frame]; r.w += helper_value(1); return r; }
@end
