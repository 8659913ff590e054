/* Launch marks: a C constructor (marksctor.c, linked after this file so that it runs after
 * this module's classes are registered) sends messages before main, main sends some more, then the
 * program sets its own mark, msgtrace_mark("first frame"), looked up with dlsym so that it
 * also runs untraced. Prints what it computed (the same traced or not). */
#import <Foundation/Foundation.h>
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

@interface Early : NSObject
+ (int)warm:(int)n;
+ (int)step:(int)n;
@end

@implementation Early
+ (int)warm:(int)n {
	usleep(2000);
	return [self step:n] + 1;
}
+ (int)step:(int)n {
	return n * 2;
}
@end

/* set by the C constructor (marksctor.c), which sends messages before main */
int launch_before_main;

static void mark(const char *name) {
	void (*f)(const char *) = (void (*)(const char *))dlsym(RTLD_DEFAULT, "msgtrace_mark");
	if (f)
		f(name);
}

int main(void) {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	int in_main = [Early warm:2];
	mark("first frame");
	int after = [Early step:3];
	printf("launch: before main %d, in main %d, after the mark %d\n", launch_before_main, in_main, after);
	[pool drain];
	return 0;
}
