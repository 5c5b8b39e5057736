/* A program that spends most of its time reading the clock, the way a
 * rate limiter or a latency histogram polls it (tests/bpf/record_vdso.sh):
 * clock_gettime runs in the vDSO, the kernel's own code mapped into every
 * process, which has no file on disk. Built -O2 without frame pointers, so
 * the samples inside the vDSO reach main only through the vDSO's CFI:
 *   _start -> main -> time_poll -> clock_gettime (libc) -> [vdso]
 * Usage: timeloop SECONDS */
#include <stdlib.h>
#include <time.h>

static volatile long sink;

/* Counts clock readings until `seconds` have passed. */
__attribute__((noinline)) long time_poll(double seconds)
{
	struct timespec start, now;
	long reads = 0;

	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		clock_gettime(CLOCK_MONOTONIC, &now);
		reads++;
	} while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
	return reads;
}

int main(int argc, char **argv)
{
	sink = time_poll(argc > 1 ? atof(argv[1]) : 2.0);
	return 0;
}
