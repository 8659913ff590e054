/*
 * stress: the recorder under real programs' conditions, on the test runtime (objc_msgSend in
 * an imported slot, as compiled Objective-C sends).
 *
 *   stress soak THREADS CALLS   THREADS threads each send CALLS messages as fast as they can:
 *                               -[Worker run:] > per call -[Worker step:] > -[Worker leaf]
 *                               (CALLS/2 steps, each with one leaf). Prints the counts.
 *   stress hang                 100 -[App work] calls, then -[App hang] > -[App wait] that never
 *                               returns (the test kills it), printing "hanging" first.
 *   stress crash                -[App crash] dereferences NULL inside a traced call.
 *   stress fork                 20 calls, fork: the child makes 30 -[Child work] and exits, the
 *                               parent waits and makes 20 more; then fork + exec of
 *                               "stress child" (40 -[Child work]).
 *   stress child                40 -[Child work].
 *   stress _exit N              5 -[App work], then _exit(N), past the exit handlers.
 *   stress soak-ready THREADS CALLS  the same, printing "ready" first (the library is loaded: a
 *                               signal it handles may be sent).
 *   stress cycle-ready THREADS CALLS  "ready", then THREADS threads each send CALLS messages,
 *                               one after the other (not nested), to -[Worker m0] ... -[Worker
 *                               m4] in turn: the n-th call of a thread is m(n % 5), so a trace
 *                               that keeps a thread's last calls says how many came before.
 *   stress churn THREADS CALLS  threads that come and go while others run: THREADS at a time,
 *                               2*THREADS in all, the k-th sending about CALLS*(k%THREADS+1)/
 *                               THREADS messages as -[Worker run:] does (short ones exit
 *                               mid-run and a new one starts in its place), and beside them a
 *                               bursty thread: 50 bursts of CALLS/100 messages 2 ms apart (its
 *                               partial chunks are taken while it is quiet). Prints the count.
 *   stress quiet                no message at all.
 *   stress badsend              its own SIGSEGV handler set (sigaction), 10 -[App work], then a
 *                               send to the receiver 0x1000 (no object; no tag bit): a fault in
 *                               objc_msgSend untraced, in the tracer's interposer traced. The
 *                               handler prints "handled SIGSEGV", sets the default back
 *                               (signal) and returns: the fault again ends the process.
 *   stress owncrash             the same handler, 10 -[App work], then -[App crash]: a fault in
 *                               the program's own code.
 *   stress clobber              -[App clobber], a method that returns with the register the ABI
 *                               says it must keep (rbx / x19) overwritten: run traced only
 *                               (untraced the caller may or may not notice).
 *   stress badclass             a send to an object whose class (a copy of App's) has a name
 *                               pointer that cannot be read: untraced it runs; traced the drain
 *                               faults naming the class. 10 -[App work] first (given 300 ms to
 *                               be written); prints "sent", then waits.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tobjc.h"

static SEL s_run, s_step, s_leaf, s_work, s_hang, s_wait, s_crash, s_clobber, s_m[5];
static Class Worker, App, Child;

typedef long (*send_l)(id, SEL, long);
#define SEND(o, s, x) ((send_l)objc_msgSend)((id)(o), (s), (x))

/* -[App clobber]: returns 0 with rbx / x19, which a callee must keep, set to 0x10 */
long clobber_imp(id self, SEL cmd, long x);
#if defined(__x86_64__)
__asm__(".text\n.globl clobber_imp\n.type clobber_imp, @function\nclobber_imp:\n"
	"\tmovq $0x10, %rbx\n\txorl %eax, %eax\n\tret\n.size clobber_imp, .-clobber_imp\n");
#elif defined(__aarch64__)
__asm__(".text\n.globl clobber_imp\n.type clobber_imp, %function\nclobber_imp:\n"
	"\tmov x19, #0x10\n\tmov x0, #0\n\tret\n.size clobber_imp, .-clobber_imp\n");
#endif

static long leaf(id self, SEL cmd, long x) { (void)self, (void)cmd; return x + 1; }
static long step(id self, SEL cmd, long x) { (void)cmd; return SEND(self, s_leaf, x); }
static long run(id self, SEL cmd, long n) {
	(void)cmd;
	long s = 0;
	for (long i = 0; i < n; i++)
		s += SEND(self, s_step, i);
	return s;
}
static long work(id self, SEL cmd, long x) { (void)self, (void)cmd; return x * 2; }
static long wait_forever(id self, SEL cmd, long x) {
	(void)self, (void)cmd, (void)x;
	printf("hanging\n");
	fflush(stdout);
	for (;;)
		pause();
	return 0;
}
static long hang(id self, SEL cmd, long x) { (void)cmd; return SEND(self, s_wait, x); }
static long crash(id self, SEL cmd, long x) {
	(void)self, (void)cmd;
	volatile long *p = NULL;
	return p[x];
}

static void *soak_thread(void *arg) {
	long n = *(long *)arg;
	char name[16];
	snprintf(name, sizeof name, "soak-%ld", n >> 40);
	pthread_setname_np(pthread_self(), name);
	id w = class_createInstance(Worker, 0);
	long calls = n & ((1L << 40) - 1);
	SEND(w, s_run, calls / 2);
	return NULL;
}

static long churn_sent;
static void *churn_thread(void *arg) {
	long n = *(long *)arg;
	char name[16];
	snprintf(name, sizeof name, "churn-%ld", n >> 40);
	pthread_setname_np(pthread_self(), name);
	id w = class_createInstance(Worker, 0);
	long calls = n & ((1L << 40) - 1);
	SEND(w, s_run, calls / 2);
	__atomic_add_fetch(&churn_sent, 1 + 2 * (calls / 2), __ATOMIC_RELAXED);
	return NULL;
}
static void *bursty_thread(void *arg) {
	long calls = *(long *)arg;
	pthread_setname_np(pthread_self(), "bursty");
	id w = class_createInstance(Worker, 0);
	for (int b = 0; b < 50; b++) {
		SEND(w, s_run, calls / 2);
		__atomic_add_fetch(&churn_sent, 1 + 2 * (calls / 2), __ATOMIC_RELAXED);
		usleep(2000);
	}
	return NULL;
}

static void *cycle_thread(void *arg) {
	long n = *(long *)arg;
	char name[16];
	snprintf(name, sizeof name, "cycle-%ld", n >> 40);
	pthread_setname_np(pthread_self(), name);
	id w = class_createInstance(Worker, 0);
	long calls = n & ((1L << 40) - 1);
	for (long i = 0; i < calls; i++)
		SEND(w, s_m[i % 5], i);
	return NULL;
}

static void setup(void) {
	s_run = sel_registerName("run:");
	s_step = sel_registerName("step:");
	s_leaf = sel_registerName("leaf");
	s_work = sel_registerName("work");
	s_hang = sel_registerName("hang");
	s_wait = sel_registerName("wait");
	s_crash = sel_registerName("crash");
	s_clobber = sel_registerName("clobber");
	Worker = objc_allocateClassPair(NULL, "Worker", 0);
	class_addMethod(Worker, s_run, (IMP)run, "l@:l");
	class_addMethod(Worker, s_step, (IMP)step, "l@:l");
	class_addMethod(Worker, s_leaf, (IMP)leaf, "l@:l");
	for (int i = 0; i < 5; i++) {
		char m[4] = {'m', (char)('0' + i), 0};
		s_m[i] = sel_registerName(m);
		class_addMethod(Worker, s_m[i], (IMP)leaf, "l@:l");
	}
	objc_registerClassPair(Worker);
	App = objc_allocateClassPair(NULL, "App", 0);
	class_addMethod(App, s_work, (IMP)work, "l@:l");
	class_addMethod(App, s_hang, (IMP)hang, "l@:l");
	class_addMethod(App, s_wait, (IMP)wait_forever, "l@:l");
	class_addMethod(App, s_crash, (IMP)crash, "l@:l");
	class_addMethod(App, s_clobber, (IMP)clobber_imp, "l@:l");
	objc_registerClassPair(App);
	Child = objc_allocateClassPair(NULL, "Child", 0);
	class_addMethod(Child, s_work, (IMP)work, "l@:l");
	objc_registerClassPair(Child);
}

static void on_segv(int s) {
	static const char msg[] = "handled SIGSEGV\n";
	(void)!write(1, msg, sizeof msg - 1);
	signal(s, SIG_DFL); /* the fault happens again on return: the default action then */
}

static void set_segv_handler(void) {
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_segv;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
}

static void child_work(int n) {
	id c = class_createInstance(Child, 0);
	for (int i = 0; i < n; i++)
		SEND(c, s_work, i);
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: stress soak|hang|crash|fork|child|quiet\n");
		return 2;
	}
	setup();
	const char *mode = argv[1];
	if (!strcmp(mode, "soak-ready") && argc == 4) {
		printf("ready\n");
		fflush(stdout);
		mode = "soak";
	}
	if (!strcmp(mode, "soak") && argc == 4) {
		int threads = atoi(argv[2]);
		long calls = atol(argv[3]);
		pthread_t th[64];
		long arg[64];
		for (int i = 0; i < threads && i < 64; i++) {
			arg[i] = (long)i << 40 | calls;
			pthread_create(&th[i], NULL, soak_thread, &arg[i]);
		}
		for (int i = 0; i < threads && i < 64; i++)
			pthread_join(th[i], NULL);
		/* per thread: 1 run + calls/2 steps + calls/2 leaves */
		printf("sent %ld\n", (long)threads * (1 + 2 * (calls / 2)));
		return 0;
	}
	if (!strcmp(mode, "cycle-ready") && argc == 4) {
		int threads = atoi(argv[2]);
		long calls = atol(argv[3]);
		pthread_t th[64];
		long arg[64];
		printf("ready\n");
		fflush(stdout);
		for (int i = 0; i < threads && i < 64; i++) {
			arg[i] = (long)i << 40 | calls;
			pthread_create(&th[i], NULL, cycle_thread, &arg[i]);
		}
		for (int i = 0; i < threads && i < 64; i++)
			pthread_join(th[i], NULL);
		printf("sent %ld\n", (long)threads * calls);
		return 0;
	}
	if (!strcmp(mode, "churn") && argc == 4) {
		int threads = atoi(argv[2]);
		long calls = atol(argv[3]), burst = calls / 100;
		if (threads < 1 || threads > 32)
			threads = 4;
		pthread_t th[64], bt;
		long arg[64];
		pthread_create(&bt, NULL, bursty_thread, &burst);
		for (int i = 0; i < 2 * threads; i++) {
			if (i >= threads) /* a new one when one of the first wave is done, shortest first */
				pthread_join(th[i - threads], NULL);
			arg[i] = (long)i << 40 | calls * (i % threads + 1) / threads;
			pthread_create(&th[i], NULL, churn_thread, &arg[i]);
		}
		for (int i = threads; i < 2 * threads; i++)
			pthread_join(th[i], NULL);
		pthread_join(bt, NULL);
		printf("sent %ld\n", churn_sent);
		return 0;
	}
	if (!strcmp(mode, "hang")) {
		id a = class_createInstance(App, 0);
		for (int i = 0; i < 100; i++)
			SEND(a, s_work, i);
		SEND(a, s_hang, 0);
		return 0;
	}
	if (!strcmp(mode, "crash")) {
		id a = class_createInstance(App, 0);
		for (int i = 0; i < 10; i++)
			SEND(a, s_work, i);
		printf("crashing\n");
		fflush(stdout);
		return (int)SEND(a, s_crash, 0);
	}
	if (!strcmp(mode, "fork")) {
		id a = class_createInstance(App, 0);
		for (int i = 0; i < 20; i++)
			SEND(a, s_work, i);
		pid_t p = fork();
		if (p == 0) {
			child_work(30);
			exit(0);
		}
		int st;
		waitpid(p, &st, 0);
		for (int i = 0; i < 20; i++)
			SEND(a, s_work, i);
		fflush(stdout);
		p = fork();
		if (p == 0) {
			execl("/proc/self/exe", argv[0], "child", (char *)NULL);
			_exit(127);
		}
		waitpid(p, &st, 0);
		printf("forked %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return 0;
	}
	if (!strcmp(mode, "child")) {
		child_work(40);
		return 0;
	}
	if (!strcmp(mode, "_exit") && argc == 3) {
		id a = class_createInstance(App, 0);
		for (int i = 0; i < 5; i++)
			SEND(a, s_work, i);
		_exit(atoi(argv[2]));
	}
	if (!strcmp(mode, "badsend") || !strcmp(mode, "owncrash")) {
		set_segv_handler();
		id a = class_createInstance(App, 0);
		for (int i = 0; i < 10; i++)
			SEND(a, s_work, i);
		printf("crashing\n");
		fflush(stdout);
		if (!strcmp(mode, "owncrash"))
			return (int)SEND(a, s_crash, 0);
		return (int)SEND(0x1000, s_work, 0);
	}
	if (!strcmp(mode, "clobber")) {
		id a = class_createInstance(App, 0);
		for (int i = 0; i < 10; i++)
			SEND(a, s_work, i);
		printf("crashing\n");
		fflush(stdout);
		return (int)SEND(a, s_clobber, 0);
	}
	if (!strcmp(mode, "badclass")) {
		id a = class_createInstance(App, 0);
		for (int i = 0; i < 10; i++)
			SEND(a, s_work, i);
		usleep(300000); /* written by the drain's next pass */
		struct tobjc_class *fake = calloc(1, sizeof *fake);
		*fake = *App;
		fake->name = (const char *)0x10;
		id o = class_createInstance(fake, 0);
		SEND(o, s_work, 1);
		printf("sent\n");
		fflush(stdout);
		sleep(30); /* the drain names the call within its period */
		return 0;
	}
	if (!strcmp(mode, "quiet"))
		return 0;
	fprintf(stderr, "stress: unknown mode %s\n", mode);
	return 2;
}
