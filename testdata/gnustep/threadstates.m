/* Threads made with pthread_create, most of them idle, for TestGNUstepThreadStates: the
 * library makes a thread's state as the thread is created (the rebound pthread_create), so
 * that its first traced call costs what a later one does; a thread that makes no traced call
 * must take no chunk and not be counted, and its state is freed as it ends.
 *
 * The main thread calls +[MTWork work:] once, then starts THREADSTATES_IDLE threads (default
 * 100) that return at once, joins them, then THREADSTATES_WORK threads (default 4) that each
 * call +[MTWork work:] once, and joins them. Prints "threadstates: I idle, W working, S" (S the
 * sum of what the calls returned), then "threadstates: N named msgtrace-drain": the threads of
 * the process by that name (traced: the library's drain, named so that it is told from the
 * program's threads). */
#import <Foundation/Foundation.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 1000

@interface MTWork : NSObject
+ (long)work:(long)n;
@end

@implementation MTWork
+ (long)work:(long)n {
	return n + 1;
}
@end

static void *idle(void *arg) { return arg; }

static void *worker(void *arg) { return (void *)[MTWork work:(long)arg]; }

static int count(const char *name, int def) {
	const char *s = getenv(name);
	int n = s ? atoi(s) : def;
	return n >= 0 && n <= MAX_THREADS ? n : def;
}

/* Starts n threads running fn and joins them: the sum of what they returned. */
static long run(int n, void *(*fn)(void *)) {
	static pthread_t t[MAX_THREADS];
	long sum = 0;
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, fn, (void *)i) != 0) {
			perror("pthread_create");
			exit(1);
		}
	for (int i = 0; i < n; i++) {
		void *r;
		pthread_join(t[i], &r);
		sum += (long)r;
	}
	return sum;
}

/* How many threads of the process are named name (/proc/self/task/TID/comm). */
static int named(const char *name) {
	int n = 0;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char path[300], comm[64] = "";
		snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof comm, f))
			comm[strcspn(comm, "\n")] = 0;
		fclose(f);
		n += strcmp(comm, name) == 0;
	}
	closedir(d);
	return n;
}

int main(void) {
	int nidle = count("THREADSTATES_IDLE", 100), nwork = count("THREADSTATES_WORK", 4);
	long sum = [MTWork work:0];
	run(nidle, idle);
	sum += run(nwork, worker);
	printf("threadstates: %d idle, %d working, %ld\n", nidle, nwork, sum);
	printf("threadstates: %d named msgtrace-drain\n", named("msgtrace-drain"));
	return 0;
}
