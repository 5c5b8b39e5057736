/* Call chains that only CFI can walk: built -O2 without frame pointers
 * (tests/bpf/record_unwind.sh). Three chains burn CPU, each reaching the
 * thread's root (main, or start_thread for the second thread):
 *   main -> unwind_sort_loop -> qsort (libc) -> ... -> unwind_compare
 *   main -> unwind_recurse x 60 -> unwind_leaf
 *   start_thread -> unwind_thread -> unwind_thread_work
 * Usage: unwindme SECONDS */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define NVALUES 4096

static volatile unsigned long sink;
static int values[NVALUES];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) int unwind_compare(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	for (int i = 0; i < 20; i++)
		sink += (unsigned)(x ^ i); /* make the comparator the hot code */
	return (x > y) - (x < y);
}

__attribute__((noinline)) void unwind_sort_loop(double seconds)
{
	double end = now() + seconds;
	while (now() < end) {
		for (int i = 0; i < NVALUES; i++)
			values[i] = (i * 7919) % NVALUES;
		qsort(values, NVALUES, sizeof(values[0]), unwind_compare);
	}
}

__attribute__((noinline)) unsigned long unwind_leaf(unsigned long n)
{
	unsigned long x = n;
	for (int i = 0; i < 200000; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	return x;
}

__attribute__((noinline)) unsigned long unwind_recurse(int depth, unsigned long n)
{
	unsigned long r;
	if (depth == 0)
		return unwind_leaf(n);
	r = unwind_recurse(depth - 1, n + (unsigned long)depth);
	sink += r; /* not a tail call */
	return r ^ (unsigned long)depth;
}

__attribute__((noinline)) void unwind_recurse_loop(double seconds)
{
	double end = now() + seconds;
	while (now() < end)
		sink += unwind_recurse(60, sink);
}

__attribute__((noinline)) unsigned long unwind_thread_work(unsigned long n)
{
	for (int i = 0; i < 1000000; i++)
		n = n * 2862933555777941757ul + 3037000493ul;
	return n;
}

static void *unwind_thread(void *arg)
{
	double end = now() + *(double *)arg;
	while (now() < end)
		sink += unwind_thread_work(sink);
	return NULL;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 2.0;
	pthread_t thread;

	if (pthread_create(&thread, NULL, unwind_thread, &seconds) != 0)
		return 1;
	unwind_sort_loop(seconds / 2);
	unwind_recurse_loop(seconds / 2);
	pthread_join(thread, NULL);
	return 0;
}
