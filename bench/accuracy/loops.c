/* Tight loops: reductions, a saxpy, a copy and bit counting over arrays that
 * stay in L1/L2. Deterministic; `loops REPS` repeats the same kernel, so every
 * instruction's execution count is affine in REPS (bench/accuracy.sh relies on it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Kernels are not pure for the compiler: it must not hoist them out of the
 * repetition loop (every repetition must execute the same instructions). */
#define KERNEL __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")

#define N 4096
static int64_t a[N], b[N], c[N];
static float x[N], y[N];

KERNEL int64_t sum(const int64_t *v, int n)
{
	BARRIER();
	int64_t s = 0;
	for (int i = 0; i < n; i++)
		s += v[i];
	return s;
}

KERNEL void saxpy(float alpha, const float *in, float *out, int n)
{
	BARRIER();
	for (int i = 0; i < n; i++)
		out[i] = alpha * in[i] + out[i] * 0.5f;
}

KERNEL void copy(int64_t *dst, const int64_t *src, int n)
{
	BARRIER();
	for (int i = 0; i < n; i++)
		dst[i] = src[i] ^ (int64_t)i;
}

KERNEL int bits(const int64_t *v, int n)
{
	BARRIER();
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

KERNEL int64_t poly(int n)
{
	BARRIER();
	int64_t h = 1;
	for (int i = 0; i < n; i++)
		h = h * 31 + (i >> 3);
	return h;
}

#ifdef CLOCK_REFERENCE
/* A clock inside the profiled run (tests/bpf/calc_accuracy.sh): a chain of
 * dependent register adds retires one add per cycle on every x86-64 core (see
 * clock.c), so its samples give the cycles per sample of this very run,
 * whatever the frequency, the VM's timer cost or a neighbour did meanwhile. */
#define CLOCK_REFERENCE_ITERATIONS 2048
KERNEL long clock_reference(void)
{
	long n = CLOCK_REFERENCE_ITERATIONS, x = 0, one = 1;
	__asm__ volatile("1: add %2, %0\n add %2, %0\n add %2, %0\n add %2, %0\n"
			 " add %2, %0\n add %2, %0\n add %2, %0\n add %2, %0\n"
			 " sub $1, %1\n jnz 1b"
			 : "+r"(x), "+r"(n)
			 : "r"(one));
	return x;
}

/* A latency-bound chain (a 3-cycle multiply and a 1-cycle add per iteration
 * on every x86-64 core since Nehalem and Zen) at about one instruction per
 * cycle: unlike poly, whose 3 IPC depend on the core's width and on what an
 * SMT sibling is doing, its best case holds whatever shares the core. */
KERNEL int64_t mulchain(int n)
{
	BARRIER();
	int64_t h = 1;
	for (int i = 0; i < n; i++)
		h = h * (int64_t)0x9E3779B97F4A7C15 + i;
	return h;
}
#endif

#ifdef CALL_LOOP
/* A loop around a call of a two-instruction leaf (tests/bpf/calc_accuracy.sh):
 * on Zen 5 nearly all of its samples land right after the call, where the
 * machine model cannot time anything, and none in the leaf. */
KERNEL int64_t twice_leaf(int64_t x)
{
	BARRIER();
	return x + x;
}

KERNEL int64_t call_loop(int n)
{
	BARRIER();
	int64_t s = 0;
	for (int i = 0; i < n; i++)
		s += twice_leaf(i);
	return s;
}
#endif

#ifndef LOOPS_NO_MAIN /* loop_overlap.c includes the kernels */
int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 1000;
	int64_t acc = 0;
	for (int r = 0; r < reps; r++) {
		for (int i = 0; i < N; i++) {
			a[i] = (int64_t)i * 2654435761u;
			x[i] = (float)i;
			y[i] = 1.0f;
		}
		acc += sum(a, N);
		saxpy(1.5f, x, y, N);
		copy(b, a, N);
		copy(c, b, N);
		acc += bits(c, N / 4);
		acc += poly(N);
		acc += (int64_t)y[r % N];
#ifdef CLOCK_REFERENCE
		acc += clock_reference();
		acc += mulchain(N);
#endif
#ifdef CALL_LOOP
		acc += call_loop(N);
#endif
	}
	printf("%lld\n", (long long)acc);
	return 0;
}
#endif
