/* A traced method that does not keep the register the return stub finds its shadow entry in
 * (rbx on x86_64, x19 on arm64; callee-saved, so every method must): the stub must fault at
 * once, in itself (SIGILL from ud2 / SIGTRAP from brk), before it reads or writes anything
 * through the register or closes entries down to it. Each case runs in a child process: a
 * writable buffer of a known pattern left in the register (nothing may be written into it), a
 * small address, and one past every mapping. */
#define _GNU_SOURCE
#include "common.h"
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

void msgtrace_after(void);

/* what the broken method leaves in the register */
uintptr_t clobber_value;
int64_t clobber(struct object *, void *, int64_t);
#if defined(__x86_64__)
#define TRAP_SIGNAL SIGILL
__asm__(".text\n.globl clobber\n.type clobber, @function\nclobber:\n"
	"\tmovq clobber_value(%rip), %rbx\n" /* rbx = the value: not kept */
	"\tleaq 1(%rdx), %rax\n"
	"\tret\n.size clobber, .-clobber\n");
#define PC(uc) ((uintptr_t)(uc)->uc_mcontext.gregs[REG_RIP])
#elif defined(__aarch64__)
#define TRAP_SIGNAL SIGTRAP
__asm__(".text\n.globl clobber\n.type clobber, %function\nclobber:\n"
	"\tadrp x9, clobber_value\n"
	"\tldr x19, [x9, :lo12:clobber_value]\n" /* x19 = the value: not kept */
	"\tadd x0, x2, #1\n"
	"\tret\n.size clobber, .-clobber\n");
#define PC(uc) ((uintptr_t)(uc)->uc_mcontext.pc)
#endif

static struct method methods[] = {{(void *)1, (void *)clobber}, {0, 0}};
static struct tclass cls = {0, methods};
static struct object obj = {&cls};

#define PATTERN 0xa5
static unsigned char wild[8192];

static int untouched(void) {
	for (size_t i = 0; i < sizeof wild; i++)
		if (wild[i] != PATTERN)
			return 0;
	return 1;
}

/* in the child: the fault must be the stub's own, and nothing written through the register */
static void on_fault(int sig, siginfo_t *si, void *ctx) {
	(void)si;
	uintptr_t pc = PC((ucontext_t *)ctx), stub = (uintptr_t)msgtrace_after;
	int ok = sig == TRAP_SIGNAL && pc >= stub && pc < stub + 512 && untouched();
	printf("%s: signal %d at msgtrace_after%+ld, buffer %s\n", ok ? "trapped" : "FAIL", sig, (long)(pc - stub),
	       untouched() ? "untouched" : "written");
	fflush(stdout);
	_exit(ok ? 0 : 1);
}

static int run_case(const char *name, uintptr_t value) {
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_fault;
		sa.sa_flags = SA_SIGINFO;
		sigaction(SIGILL, &sa, NULL);
		sigaction(SIGTRAP, &sa, NULL);
		sigaction(SIGSEGV, &sa, NULL);
		sigaction(SIGBUS, &sa, NULL);
		clobber_value = value;
		SEND(&obj, (void *)1, 41);
		printf("FAIL %s: the broken method's call returned\n", name);
		fflush(stdout);
		_exit(1);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("FAIL %s: child status %#x\n", name, st);
		return 0;
	}
	return 1;
}

int main(void) {
	use_test_runtime();
	memset(wild, PATTERN, sizeof wild);
	int ok = run_case("a writable buffer", (uintptr_t)(wild + sizeof wild / 2));
	ok &= run_case("a small address", 0x10);
	ok &= run_case("past every mapping", ~(uintptr_t)0 - 4095);
	if (ok && !failures)
		printf("OK: a method that does not keep the stub's register faults in the stub, nothing written through it\n");
	return ok && !failures ? 0 : 1;
}
