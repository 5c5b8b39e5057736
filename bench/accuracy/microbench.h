/* Shared by the machine-model microbenchmarks in bench/accuracy/ (x86-64):
 * CPU time, the add-chain clock (clock.c's method) and a timed loop. */
#ifndef ECPI_BENCH_MICROBENCH_H
#define ECPI_BENCH_MICROBENCH_H

#include <stdio.h>
#include <time.h>

static double cpu_seconds(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A chain of dependent register adds retires one add per cycle on every
 * x86-64 core: adds per second = cycles per second. */
static double add_chain_mhz(void)
{
	long n = 50000000, x = 0, one = 1;
	double a = cpu_seconds();
	__asm__ volatile("1: add %2, %0\n add %2, %0\n add %2, %0\n add %2, %0\n"
			 " add %2, %0\n add %2, %0\n add %2, %0\n add %2, %0\n"
			 " sub $1, %1\n jnz 1b"
			 : "+r"(x), "+r"(n)
			 : "r"(one));
	return 8 * 50000000.0 / (cpu_seconds() - a) / 1e6;
}

/* Times ITERATIONS runs of `body` (asm text) and prints its cycles per
 * iteration at `mhz`. Operands: %[i] the iteration (0, 1, ...), %[s] a
 * scratch accumulator, %[p] a pointer to 64 longs; rax, rcx, rdx, rdi,
 * r8-r11 and xmm0-xmm8 may be clobbered. TIME_LOOP_PER prints cycles per
 * `unit`, a `per`-th of the body (latency.c: eight steps a body). */
static long microbench_memory[64] __attribute__((aligned(64), unused));
#define MICROBENCH_ITERATIONS 20000000L
#define TIME_LOOP_PER(mhz, per, unit, name, body)                                                  \
	do {                                                                                       \
		long i = 0, s = 0, n = MICROBENCH_ITERATIONS, *p = microbench_memory;              \
		double a = cpu_seconds();                                                          \
		__asm__ volatile("1:\n" body "\n add $1, %[i]\n cmp %[n], %[i]\n jne 1b"           \
				 : [i] "+r"(i), [s] "+r"(s)                                        \
				 : [n] "r"(n), [p] "r"(p)                                          \
				 : "rax", "rcx", "rdx", "rdi", "r8", "r9", "r10", "r11", "memory", "cc",   \
				   "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8");   \
		printf("%-42s %.2f cycles per %s\n", name,                                         \
		       (cpu_seconds() - a) * (mhz) * 1e6 / MICROBENCH_ITERATIONS / (per), unit);   \
	} while (0)
#define TIME_LOOP(mhz, name, body) TIME_LOOP_PER(mhz, 1, "iteration", name, body)

#endif
