/* How long a loop-carried dependency chain takes per iteration when the loop
 * is short and re-entered with a fresh value (docs/ACCURACY.md, `bits`).
 * The same two-instruction recurrence (x = x & (x - 1), one cycle each) is
 * timed three ways, in cycles of the add-chain clock (bench/accuracy/clock.c):
 *   long loop:   one loop of 100 M iterations; each iteration waits for the
 *                last, so 2 cycles on every x86-64 core;
 *   short loops: the same recurrence in an inner loop of 64 iterations,
 *                re-entered from a register each time: a core whose window
 *                holds the next entry overlaps it with the current one;
 *   bits():      loops.c's bit count on its own data.
 * x86-64 only. Usage: loop_overlap */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double clock_mhz(void)
{
	long n = 50000000, x = 0, one = 1;
	double a = now();
	__asm__ volatile("1: add %2, %0\n add %2, %0\n add %2, %0\n add %2, %0\n"
			 " add %2, %0\n add %2, %0\n add %2, %0\n add %2, %0\n"
			 " sub $1, %1\n jnz 1b"
			 : "+r"(x), "+r"(n)
			 : "r"(one));
	return 8 * 50000000.0 / (now() - a) / 1e6;
}

#define N 4096
static int64_t data[N];

__attribute__((noinline)) static int bits(const int64_t *v, int n)
{
	__asm__ volatile("" ::: "memory");
	int total = 0;
	for (int i = 0; i < n; i++) {
		uint64_t w = (uint64_t)v[i];
		while (w) {
			w &= w - 1;
			total++;
		}
	}
	return total;
}

int main(void)
{
	double mhz = clock_mhz();
	printf("clock %.0f MHz\n", mhz);

	/* long loop: 100 M iterations of lea/and (latency does not depend on the values) */
	{
		long x = -1, y = 0, n = 100000000;
		double a = now();
		__asm__ volatile("1: lea -1(%0), %1\n and %1, %0\n sub $1, %2\n jnz 1b"
				 : "+r"(x), "+r"(y), "+r"(n));
		printf("long loop, lea/and recurrence: %.2f cycles per iteration (2 on any core)\n",
		       (now() - a) * mhz * 1e6 / 100000000.0);
	}
	/* short loops: 64 iterations of lea/and from x = -1, 2 M times */
	{
		long x = 0, y = 0, n = 2000000, w = -1;
		double a = now();
		__asm__ volatile("2: mov %3, %0\n1: lea -1(%0), %1\n and %1, %0\n jne 1b\n sub $1, %2\n jnz 2b"
				 : "+r"(x), "+r"(y), "+r"(n)
				 : "r"(w));
		printf("short loops, lea/and recurrence: %.2f cycles per inner iteration (2 if not overlapped)\n",
		       (now() - a) * mhz * 1e6 / (64.0 * 2000000.0));
	}
	/* bits() on loops.c's data (c = a there) */
	{
		for (int i = 0; i < N; i++)
			data[i] = (int64_t)i * 2654435761u;
		long iterations = 0;
		double a = now();
		for (int r = 0; r < 20000; r++)
			iterations += bits(data, N / 4);
		printf("bits(): %.2f cycles per inner iteration (2 if not overlapped)\n",
		       (now() - a) * mhz * 1e6 / (double)iterations);
	}
	return 0;
}
