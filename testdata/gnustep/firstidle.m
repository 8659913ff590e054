/* Preloaded next to libmsgtrace into a GNUstep GUI application: when the application has
 * finished launching, a notification is queued to be posted when its run loop is first idle
 * (nothing else to do); then it marks "first idle" on the trace's timeline (msgtrace_mark) and
 * the application exits through exit(), whose handlers write the trace. */
#import <Foundation/Foundation.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

@interface MTFirstIdle : NSObject
@end

@implementation MTFirstIdle
+ (void)load {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	[[NSNotificationCenter defaultCenter] addObserver:self selector:@selector(launched:)
						     name:@"NSApplicationDidFinishLaunchingNotification" object:nil];
	[[NSNotificationCenter defaultCenter] addObserver:self selector:@selector(idle:)
						     name:@"MTFirstIdle" object:nil];
	[pool drain];
}
+ (void)launched:(NSNotification *)n {
	NSNotification *idle = [NSNotification notificationWithName:@"MTFirstIdle" object:nil];
	[[NSNotificationQueue defaultQueue] enqueueNotification:idle postingStyle:NSPostWhenIdle];
}
+ (void)idle:(NSNotification *)n {
	/* the launch's end on the trace's timeline (msgtrace_mark; looked up: it runs untraced too) */
	void (*mark)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "msgtrace_mark");
	if (mark)
		mark("first idle");
	fprintf(stderr, "firstidle: launched and idle\n");
	exit(0);
}
@end
