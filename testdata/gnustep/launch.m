/* Launch: what runs before main, traced from the first +load (TestGNUstepLaunch). Its +load
 * methods run while gcc's runtime registers the program's module (its lock held), before main;
 * launchctor.c's constructor sends messages before main too. The environment picks what else
 * the +load methods do (they run before main sees its arguments):
 *   LAUNCH_FILL=N     +[Filler load] makes N calls (more than a small chunk pool holds)
 *   LAUNCH_PLUGIN=P   +[Loader load] dlopens the plugin P (its module registers inside)
 * and the arguments what main does after its own calls:
 *   plugin P          dlopen the plugin P (launchplugin.m) and ask its class
 *   bundle B          load the NSBundle B (launchbundle.m) and ask its principal class */
#import <Foundation/Foundation.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

@interface Early : NSObject
+ (void)warm;
+ (void)ctorWork;
@end

@implementation Early
+ (void)load {
	[self warm];
}
+ (void)warm {
	usleep(2000);
}
+ (void)ctorWork { /* sent by launchctor.c's constructor */
	[self warm];
}
@end

/* +initialize is sent when the class is first messaged, from inside the runtime's lookup,
 * with its lock held */
@interface Slow : NSObject
+ (int)warm;
@end
static int slow_inits;
@implementation Slow
+ (void)initialize {
	if (self != [Slow class])
		return;
	slow_inits++;
	usleep(2000);
	[self warm];
}
+ (int)warm {
	return slow_inits;
}
@end

@interface Filler : NSObject
+ (int)tick:(int)x;
@end
static int fill_sum;
@implementation Filler
+ (void)load {
	const char *n = getenv("LAUNCH_FILL");
	for (int i = 0, k = n ? atoi(n) : 0; i < k; i++)
		fill_sum += [self tick:i];
}
+ (int)tick:(int)x {
	return x & 1;
}
@end

@interface Loader : NSObject
+ (void)found:(void *)handle;
@end
static int loader_found;
@implementation Loader
+ (void)load {
	const char *p = getenv("LAUNCH_PLUGIN");
	if (p)
		[self found:dlopen(p, RTLD_NOW)];
}
+ (void)found:(void *)handle {
	loader_found = handle != NULL;
}
@end

int main(int argc, char **argv) {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	[Early warm];
	printf("launch: slow initialized %d time(s)\n", [Slow warm]);
	if (getenv("LAUNCH_FILL"))
		printf("launch: filler %d\n", fill_sum);
	if (getenv("LAUNCH_PLUGIN"))
		printf("launch: loader found the plugin: %d\n", loader_found);
	if (argc > 2 && strcmp(argv[1], "plugin") == 0) {
		if (!dlopen(argv[2], RTLD_NOW)) {
			fprintf(stderr, "%s\n", dlerror());
			return 1;
		}
		id p = [[objc_getClass("LPlugin") new] autorelease];
		printf("launch: plugin answers %d\n", (int)(intptr_t)[p performSelector:@selector(answer)]);
	}
	if (argc > 2 && strcmp(argv[1], "bundle") == 0) {
		NSBundle *b = [NSBundle bundleWithPath:[NSString stringWithUTF8String:argv[2]]];
		if (![b load]) {
			fprintf(stderr, "cannot load bundle %s\n", argv[2]);
			return 1;
		}
		id p = [[[b principalClass] new] autorelease];
		printf("launch: bundle answers %d\n", (int)(intptr_t)[p performSelector:@selector(answer)]);
	}
	[pool drain];
	return 0;
}
