/* Workload for bench/probe_overhead.sh: calls bench_fn N times from a
 * fixed call path five frames deep (main > level1 > level2 > level3 >
 * bench_loop > bench_fn) and prints the nanoseconds per call. Built by the
 * script twice: with frame pointers, and without (-fomit-frame-pointer, for
 * the DWARF unwinding case). With WORK, bench_fn also runs WORK rounds of a
 * dependent xorshift chain (net-of-probe figures: functions of about
 * 100 ns, 1 us and 10 us per call).
 * Usage: probe_overhead N [start-delay-ms [WORK]] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;
static long work = 0;

__attribute__((noinline)) uint64_t bench_fn(uint64_t x)
{
	for (long i = 0; i < work; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	sink += x;
	return x * 3;
}

__attribute__((noinline)) uint64_t bench_loop(long n)
{
	uint64_t s = 0;
	for (long i = 0; i < n; i++)
		s += bench_fn((uint64_t)i);
	return s;
}

__attribute__((noinline)) uint64_t level3(long n) { return bench_loop(n) + 1; }
__attribute__((noinline)) uint64_t level2(long n) { return level3(n) + 1; }
__attribute__((noinline)) uint64_t level1(long n) { return level2(n) + 1; }

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	if (argc > 2)
		usleep((useconds_t)atoi(argv[2]) * 1000);
	if (argc > 3)
		work = atol(argv[3]);
	struct timespec t0, t1, c0, c1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	uint64_t s = level1(n);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
	double cpu = (c1.tv_sec - c0.tv_sec) * 1e9 + (c1.tv_nsec - c0.tv_nsec);
	printf("%.1f ns/call (%ld calls, sum %llu), %.1f ns/call on-CPU\n", ns / n, n, (unsigned long long)s, cpu / n);
	return 0;
}
