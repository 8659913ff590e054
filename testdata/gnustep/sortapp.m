/* A Foundation program (gnustep-base, gcc's GNU runtime) whose methods Foundation calls back:
 * -[NSMutableArray sortUsingSelector:] calls -[Num compare:] (inherited by SubNum: named by Num,
 * the class whose implementation runs), inside an NSAutoreleasePool. With the argument "throw",
 * an NSException raised in a traced method is caught two calls up; with "where", it prints
 * which object implements a few methods (a trampoline of the library, or not). */
#define _GNU_SOURCE /* Dl_info */
#import <Foundation/Foundation.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <string.h>

#include "num.h"

@interface SubNum : Num
@end
@implementation SubNum
@end

/* -init sent from inside Foundation (+[NSObject new]): no call site of ours */
@interface Counter : NSObject {
	int n;
}
- (int)bump;
@end
@implementation Counter
- (id)init {
	if ((self = [super init]))
		n = 100;
	return self;
}
- (int)bump {
	return ++n;
}
@end

@interface Thrower : NSObject
- (void)boom;
- (void)middle;
- (int)top;
@end

@implementation Thrower
- (void)boom {
	[NSException raise:@"Boom" format:@"raised in %s", "boom"];
}
- (void)middle {
	[self boom];
	printf("not reached\n");
}
- (int)top {
	@try {
		[self middle];
	} @catch (NSException *e) {
		printf("caught %s: %s\n", [[e name] UTF8String], [[e reason] UTF8String]);
		return 1;
	}
	return 0;
}
@end

/* The app's category on a Foundation class: its methods are the app's. */
@interface NSString (SortApp)
- (NSUInteger)sortappWords;
+ (NSString *)sortappGreeting;
@end
@implementation NSString (SortApp)
- (NSUInteger)sortappWords {
	return [[self componentsSeparatedByString:@" "] count];
}
+ (NSString *)sortappGreeting {
	return @"hello category world";
}
@end

/* Key-value observing: Foundation makes a subclass of the observed object's class at run time
 * and gives it a setter that notifies around the original one. */
@interface Obs : NSObject {
	int v;
}
- (int)v;
- (void)setV:(int)x;
@end
@implementation Obs
- (int)v {
	return v;
}
- (void)setV:(int)x {
	v = x;
}
@end

@interface Watcher : NSObject {
@public
	int seen;
}
@end
@implementation Watcher
- (void)observeValueForKeyPath:(NSString *)path ofObject:(id)o change:(NSDictionary *)change context:(void *)ctx {
	(void)path, (void)o, (void)change, (void)ctx;
	seen++;
}
@end

/* A class whose +initialize adds a method while another thread is inside dlopen: gcc's
 * runtime sends +initialize holding its lock; the other thread holds the loader's lock and
 * waits for the runtime's in the plugin's module constructor. */
static const char *plugin_path;
static void *load_plugin(void *arg) {
	(void)arg;
	if (!dlopen(plugin_path, RTLD_NOW))
		printf("dlopen: %s\n", dlerror());
	return NULL;
}
static pthread_t loader;
static int lazy_extra(id self, SEL cmd) {
	(void)self, (void)cmd;
	return 7;
}
@interface Lazy : NSObject
@end
@implementation Lazy
+ (void)initialize {
	if (self != [Lazy class])
		return;
	pthread_create(&loader, NULL, load_plugin, NULL);
	usleep(200000); /* the loader is in dlopen now, waiting for the runtime's lock */
	class_addMethod(self, @selector(extra), (IMP)lazy_extra, "i@:");
}
@end

/* A class whose +initialize (gcc's runtime holds its lock meanwhile) makes many traced calls:
 * more than a small pool holds, so the thread waits for the drain to free chunks. */
@interface Busy : NSObject
+ (int)tick:(int)x;
@end
static int busy_sum;
@implementation Busy
+ (void)initialize {
	if (self == [Busy class])
		for (int i = 0; i < 200000; i++)
			busy_sum += [Busy tick:i];
}
+ (int)tick:(int)x {
	return x & 1;
}
@end

static int dyn_twice(id self, SEL cmd, int x) {
	(void)self, (void)cmd;
	return 2 * x;
}
static int dyn_thrice(id self, SEL cmd, int x) {
	(void)self, (void)cmd;
	return 3 * x;
}

int main(int argc, char **argv) {
	NSAutoreleasePool *pool = [NSAutoreleasePool new];
	if (argc > 1 && strcmp(argv[1], "throw") == 0) {
		Thrower *t = [[Thrower new] autorelease];
		int caught = [t top];
		printf("after the exception: %s\n", caught ? "caught" : "missed");
		[pool drain];
		return caught ? 0 : 1;
	}
	if (argc > 1 && strcmp(argv[1], "where") == 0) {
		/* the object implementing a few methods of the program and of Foundation: a
		 * trampoline of the library's while they are instrumented */
		id objs[] = {[NSMutableArray array], @"text", [[NSObject new] autorelease], pool,
			     [[[Num alloc] initWithValue:1] autorelease]};
		SEL sels[] = {@selector(addObject:), @selector(length), @selector(description), @selector(drain),
			      @selector(compare:)};
		for (int i = 0; i < 5; i++) {
			Dl_info info;
			IMP imp = class_getMethodImplementation(object_getClass(objs[i]), sels[i]);
			const char *f = dladdr((void *)imp, &info) && info.dli_fname ? info.dli_fname : "?";
			printf("%s implemented in %s\n", sel_getName(sels[i]), strrchr(f, '/') ? strrchr(f, '/') + 1 : f);
		}
		[pool drain];
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "stop") == 0) {
		/* msgtrace_stop() when the library is preloaded: the method gets its IMP back */
		Counter *c = [[Counter new] autorelease];
		[c bump];
		IMP traced = [c methodForSelector:@selector(bump)];
		int (*stop)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "msgtrace_stop");
		if (stop && stop() != 0)
			printf("msgtrace_stop failed\n");
		Dl_info info;
		IMP imp = [c methodForSelector:@selector(bump)];
		int ours = dladdr((void *)imp, &info) && info.dli_fname && strstr(info.dli_fname, "sortapp");
		printf("bump implemented in %s; %d\n", ours ? "sortapp" : info.dli_fname, [c bump]);
		/* msgtrace_start() after the stop: the method is traced again, by the IMP it had */
		int (*start)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "msgtrace_start");
		if (start && start() != 0)
			printf("msgtrace_start failed\n");
		printf("restarted: same IMP %s; %d\n", [c methodForSelector:@selector(bump)] == traced ? "yes" : "no", [c bump]);
		[pool drain];
		return 0;
	}
	if (argc > 2 && strcmp(argv[1], "initlock") == 0) {
		plugin_path = argv[2];
		id l = [[Lazy new] autorelease]; /* +initialize */
		pthread_join(loader, NULL);
		id p = [[objc_getClass("Plugin") new] autorelease];
		printf("initlock: extra %d, plugin answers %d\n", (int)(intptr_t)[l performSelector:@selector(extra)],
		       (int)(intptr_t)[p performSelector:@selector(answer)]);
		[pool drain];
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "initbusy") == 0) {
		[Busy class];
		printf("initbusy: %d\n", busy_sum);
		[pool drain];
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "category") == 0) {
		printf("category: %lu words\n", (unsigned long)[[NSString sortappGreeting] sortappWords]);
		[pool drain];
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "kvo") == 0) {
		Obs *o = [[Obs new] autorelease];
		Watcher *w = [[Watcher new] autorelease];
		[o addObserver:w forKeyPath:@"v" options:NSKeyValueObservingOptionNew context:NULL];
		for (int i = 1; i <= 3; i++)
			[o setV:i];
		[o removeObserver:w forKeyPath:@"v"];
		printf("kvo: %d changes seen, v %d\n", w->seen, [o v]);
		[pool drain];
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "dynamic") == 0) {
		/* a class created at run time, its method added before it is registered */
		Class dyn = objc_allocateClassPair([NSObject class], "Dyn", 0);
		class_addMethod(dyn, @selector(twice:), (IMP)dyn_twice, "i@:i");
		objc_registerClassPair(dyn);
		/* and one added after it registered (KVO adds its setters so) */
		class_addMethod(dyn, @selector(thrice:), (IMP)dyn_thrice, "i@:i");
		id d = [[dyn new] autorelease];
		int (*send)(id, SEL, int) = (int (*)(id, SEL, int))objc_msg_lookup(d, @selector(twice:));
		printf("dynamic twice %d\n", send(d, @selector(twice:), 21));
		send = (int (*)(id, SEL, int))objc_msg_lookup(d, @selector(thrice:));
		printf("dynamic thrice %d\n", send(d, @selector(thrice:), 14));
		[pool drain];
		return 0;
	}
	if (argc > 2 && strcmp(argv[1], "plugin") == 0) {
		/* classes of an object loaded later register from its constructors, inside dlopen */
		if (!dlopen(argv[2], RTLD_NOW)) {
			printf("dlopen: %s\n", dlerror());
			return 1;
		}
		id p = [[objc_getClass("Plugin") new] autorelease];
		printf("plugin answers %d\n", (int)(intptr_t)[p performSelector:@selector(answer)]);
		[pool drain];
		return 0;
	}
	NSMutableArray *a = [NSMutableArray array];
	for (int i = 0; i < 20; i++)
		[a addObject:[[[SubNum alloc] initWithValue:(i * 7) % 20] autorelease]];
	[a sortUsingSelector:@selector(compare:)];
	Counter *c = [[Counter new] autorelease];
	/* an IMP called directly, as code that caches IMPs does */
	int (*bump)(id, SEL) = (int (*)(id, SEL))[c methodForSelector:@selector(bump)];
	printf("counter %d %d\n", bump(c, @selector(bump)), [c bump]);
	for (NSUInteger i = 0; i < [a count]; i++)
		printf("%d ", [(Num *)[a objectAtIndex:i] value]);
	printf("\n");
	[pool drain];
	return 0;
}
