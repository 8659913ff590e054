// The macOS demo app `make demo` traces: Foundation objects, recursion, a super call, a
// class method that sleeps, an exception caught by its caller, and three named threads.
// Build: clang -fobjc-arc -O1 -g -o demoapp demo.m -framework Foundation
#import <Foundation/Foundation.h>
#include <pthread.h>

@interface Shape : NSObject
- (NSString *)describe;
- (NSString *)name;
@end
@implementation Shape
- (NSString *)describe { return [NSString stringWithFormat:@"Shape<%@>", [self name]]; }
- (NSString *)name { return NSStringFromClass([self class]); }
@end

@interface Square : Shape
@end
@implementation Square
- (NSString *)describe { return [[super describe] stringByAppendingString:@"!"]; }
@end

@interface Worker : NSObject
- (long)fib:(long)n;
@end
@implementation Worker
- (long)fib:(long)n { return n < 2 ? n : [self fib:n - 1] + [self fib:n - 2]; }
@end

@interface Sleeper : NSObject
+ (void)nap:(double)seconds;
@end
@implementation Sleeper
+ (void)nap:(double)seconds { [NSThread sleepForTimeInterval:seconds]; }
@end

@interface Thrower : NSObject
- (void)boom;
- (BOOL)run;
@end
@implementation Thrower
- (void)boom { [NSException raise:NSInternalInconsistencyException format:@"boom"]; }
- (BOOL)run {
	@try {
		[self boom];
	} @catch (NSException *e) {
		return YES;
	}
	return NO;
}
@end

static void *work(void *arg) {
	char name[16];
	snprintf(name, sizeof name, "worker-%ld", (long)arg);
	pthread_setname_np(name);
	@autoreleasepool {
		printf("%s fib(18) = %ld\n", name, [[Worker new] fib:18]);
	}
	return NULL;
}

int main(void) {
	@autoreleasepool {
		printf("fib(20) = %ld\n", [[Worker new] fib:20]);
		printf("describe = %s\n", [[[Square new] describe] UTF8String]);
		[Sleeper nap:0.2];
		printf("caught = %d\n", [[Thrower new] run]);
		NSMutableArray *a = [NSMutableArray array];
		for (int i = 0; i < 1000; i++)
			[a addObject:@(i)];
		printf("sorted = %lu\n", (unsigned long)[[a sortedArrayUsingSelector:@selector(compare:)] count]);
		pthread_t t[3];
		for (long i = 0; i < 3; i++)
			pthread_create(&t[i], NULL, work, (void *)(i + 1));
		for (int i = 0; i < 3; i++)
			pthread_join(t[i], NULL);
	}
	return 0;
}
