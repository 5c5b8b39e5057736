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
	}
	printf("%lld\n", (long long)acc);
	return 0;
}
