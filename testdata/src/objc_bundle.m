/* Bundle fixture (MH_BUNDLE, what a plugin or an XCTest bundle is). */
#include "objc_classes.m"

@interface Plugin : Root
- (int)value;
@end

@implementation Plugin
- (int)value { return [super value] + helper_value(3) + helper_tls; }
@end

int fixture_bundle_entry(void) { return [[Plugin new] value]; }
