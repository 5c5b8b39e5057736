/* How long a loop-carried dependency chain takes per iteration when the loop
 * is short and re-entered with a fresh value (docs/ACCURACY.md, `bits`).
 * The same two-instruction recurrence (x = x & (x - 1), one cycle each) is
 * timed three ways, in cycles of the add-chain clock (bench/accuracy/clock.c):
 *   long loop:   one loop of 100 M iterations; each iteration waits for the
 *                last, so 2 cycles on every x86-64 core;
 *   short loops: the same recurrence in an inner loop of 64 iterations,
 *                re-entered from a register each time: a core whose window
 *                holds the next entry overlaps it with the current one;
 *   bits():      loops.c's bit count (included from it) on its data.
 * x86-64 only. Usage: loop_overlap */
#define LOOPS_NO_MAIN
#pragma GCC diagnostic ignored "-Wunused-variable" /* loops.c's main uses the rest */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "loops.c" /* its bits() and arrays */
#include "microbench.h"

int main(void)
{
	double mhz = add_chain_mhz();
	printf("clock %.0f MHz\n", mhz);

	/* long loop: 100 M iterations of lea/and (latency does not depend on the values) */
	{
		long x = -1, y = 0, n = 100000000;
		double a = cpu_seconds();
		__asm__ volatile("1: lea -1(%0), %1\n and %1, %0\n sub $1, %2\n jnz 1b"
				 : "+r"(x), "+r"(y), "+r"(n));
		printf("long loop, lea/and recurrence: %.2f cycles per iteration (2 on any core)\n",
		       (cpu_seconds() - a) * mhz * 1e6 / 100000000.0);
	}
	/* short loops: 64 iterations of lea/and from x = -1, 2 M times */
	{
		long x = 0, y = 0, n = 2000000, w = -1;
		double a = cpu_seconds();
		__asm__ volatile("2: mov %3, %0\n1: lea -1(%0), %1\n and %1, %0\n jne 1b\n sub $1, %2\n jnz 2b"
				 : "+r"(x), "+r"(y), "+r"(n)
				 : "r"(w));
		printf("short loops, lea/and recurrence: %.2f cycles per inner iteration (2 if not overlapped)\n",
		       (cpu_seconds() - a) * mhz * 1e6 / (64.0 * 2000000.0));
	}
	/* loops.c's bits() on its data (c = a there) */
	{
		for (int i = 0; i < N; i++)
			a[i] = (int64_t)i * 2654435761u;
		long iterations = 0;
		double start = cpu_seconds();
		for (int r = 0; r < 20000; r++)
			iterations += bits(a, N / 4);
		printf("bits(): %.2f cycles per inner iteration (2 if not overlapped)\n",
		       (cpu_seconds() - start) * mhz * 1e6 / (double)iterations);
	}
	return 0;
}
