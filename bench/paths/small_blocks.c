/* small_blocks: a loop with a block every two to four instructions (four
 * predictable branches per element of a 4 KiB array), where the inline
 * paths build's per-block countdown, a chain of dependent decrements of
 * one thread-local counter, sets the pace (docs/PATHS.md, "The block log
 * through a register", issue 31). Timed by bench/paths/paired_rounds.sh:
 *
 *   clang -O2 -o small_blocks.plain bench/paths/small_blocks.c
 *   clang -O2 $(ecpi flags paths --inline) -o small_blocks.inline bench/paths/small_blocks.c
 *   small_blocks [REPEATS]      (default 2000 passes over the array)
 *
 * The empty asm in each arm keeps clang from turning the branch into a
 * select. Prints a checksum and the loop's wall time. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

__attribute__((noinline)) static uint64_t run(const uint8_t *a, long n, long repeats)
{
	uint64_t s = 1;
	for (long r = 0; r < repeats; r++)
		for (long i = 0; i < n; i++) {
			unsigned x = a[i];
			if (x & 1) {
				__asm__ volatile("");
				s += x;
			}
			if (x & 2) {
				__asm__ volatile("");
				s ^= s >> 3;
			}
			if (x & 4) {
				__asm__ volatile("");
				s += 7;
			}
			if (x & 8) {
				__asm__ volatile("");
				s = s * 5;
			}
		}
	return s;
}

int main(int argc, char **argv)
{
	long repeats = argc > 1 ? atol(argv[1]) : 2000;
	static uint8_t a[4096];
	for (int i = 0; i < 4096; i++)
		a[i] = (uint8_t)(i % 16);
	double start = seconds_now();
	uint64_t s = run(a, 4096, repeats);
	printf("small_blocks: checksum %llx, loop %.3f s\n", (unsigned long long)s, seconds_now() - start);
	return 0;
}
