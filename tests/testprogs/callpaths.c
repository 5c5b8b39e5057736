/* One function, `cp_target`, called along known call paths with known
 * counts, for `ecpi probe` (iPath): several call sites, two sites in one
 * caller, recursion, a tail call, a call through a function pointer, and
 * calls that sleep (blocked time) or spin (on-CPU time).
 * Usage: callpaths            one round, then exit
 *        callpaths --loop MS  a round every MS milliseconds until killed,
 *                             printing "round N sum S" after each
 * Calls per round (path, outermost first, ending in cp_target):
 *   main > cp_site_a (loop)                   3
 *   main > cp_site_b (first site)             1
 *   main > cp_site_b (second site, loop)      2
 *   main > cp_recurse > cp_recurse x3         1   (recursion: 4 cp_recurse frames)
 *   main > cp_via_tail                        4   (cp_tail_caller tail-calls: no frame)
 *   main > cp_indirect (function pointer)     5
 *   main > cp_sleeper                         2   (each sleeps 2 ms)
 *   main > cp_spinner                         2   (each spins ~2 ms of CPU)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;
/* Loop bounds the compiler cannot see: loops are not unrolled into extra call sites. */
volatile int cp_three = 3, cp_two = 2, cp_four = 4, cp_five = 5;

__attribute__((noinline)) int cp_target(int work)
{
	if (work > 0) {
		usleep((useconds_t)work);
	} else if (work < 0) {
		struct timespec t0, t;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
		do {
			for (int i = 0; i < 1000; i++)
				sink = sink * 6364136223846793005ull + 1;
			clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
		} while ((t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000 < -work);
	}
	sink++;
	return work + 1;
}

__attribute__((noinline)) int cp_site_a(void)
{
	int s = 0;
	for (int i = 0; i < cp_three; i++)
		s += cp_target(0);
	return s;
}

__attribute__((noinline)) int cp_site_b(void)
{
	int s = cp_target(0);
	for (int i = 0; i < cp_two; i++)
		s += cp_target(0);
	return s;
}

__attribute__((noinline)) int cp_recurse(int n)
{
	if (n == 0)
		return cp_target(0);
	return cp_recurse(n - 1) + 1;
}

/* A sibling call: cp_tail_caller's frame is replaced by cp_target's, so the
 * path goes straight from cp_via_tail to cp_target. */
#pragma GCC push_options
#pragma GCC optimize("optimize-sibling-calls")
__attribute__((noinline)) int cp_tail_caller(int x)
{
	return cp_target(x);
}
#pragma GCC pop_options

__attribute__((noinline)) int cp_via_tail(void)
{
	int s = 0;
	for (int i = 0; i < cp_four; i++)
		s += cp_tail_caller(0);
	return s;
}

int (*volatile cp_pointer)(int) = cp_target;

__attribute__((noinline)) int cp_indirect(void)
{
	int s = 0;
	for (int i = 0; i < cp_five; i++)
		s += cp_pointer(0);
	return s;
}

__attribute__((noinline)) int cp_sleeper(void)
{
	return cp_target(2000) + cp_target(2000);
}

__attribute__((noinline)) int cp_spinner(void)
{
	return cp_target(-2000) + cp_target(-2000);
}

__attribute__((noinline)) int cp_round(void)
{
	return cp_site_a() + cp_site_b() + cp_recurse(3) + cp_via_tail() + cp_indirect() + cp_sleeper() + cp_spinner();
}

int main(int argc, char **argv)
{
	if (argc > 2 && strcmp(argv[1], "--loop") == 0) {
		int ms = atoi(argv[2]);
		setvbuf(stdout, NULL, _IOLBF, 0);
		printf("ready\n");
		for (long round = 1;; round++) {
			int s = cp_round();
			printf("round %ld sum %d\n", round, s);
			usleep((useconds_t)ms * 1000);
		}
	}
	int s = cp_site_a() + cp_site_b() + cp_recurse(3) + cp_via_tail() + cp_indirect() + cp_sleeper() + cp_spinner();
	printf("sum %d\n", s);
	return 0;
}
