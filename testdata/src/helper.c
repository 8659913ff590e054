/* libhelper: a plain C dylib the Objective-C fixtures link against, so that they import from
 * a second dylib besides libSystem and libobjc, including a thread-local variable (which makes
 * the importer's __thread_ptrs section). No system headers: the fixtures need no SDK. */
int printf(const char *, ...);

__thread int helper_tls = 7;
int helper_counter;

int helper_value(int x) {
	helper_counter += x;
	printf("helper %d\n", x);
	return helper_counter + helper_tls;
}

double helper_scale(double v) { return v * 1.5; }
