/* Branchy code over pseudo-random data: range classification, a binary
 * search, min/max tracking and a data-dependent state machine. Unpredictable
 * branches give dynamic stalls (mispredictions). Deterministic per repetition. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Kernels are not pure for the compiler: it must not hoist them out of the
 * repetition loop (every repetition must execute the same instructions). */
#define KERNEL __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")

#define N 8192
static uint32_t data[N];
static uint32_t sorted[N];

KERNEL void fill(uint32_t seed)
{
	BARRIER();
	for (int i = 0; i < N; i++) {
		seed = seed * 1103515245u + 12345u;
		data[i] = seed >> 8;
		sorted[i] = (uint32_t)i * 2048u;
	}
}

KERNEL int classify(const uint32_t *v, int n)
{
	BARRIER();
	int small = 0, medium = 0, large = 0, odd = 0;
	for (int i = 0; i < n; i++) {
		uint32_t x = v[i];
		if (x < (1u << 20))
			small++;
		else if (x < (1u << 22))
			medium += 2;
		else
			large += x & 3;
		if (x & 1)
			odd++;
	}
	return small * 7 + medium * 5 + large * 3 + odd;
}

KERNEL int search(const uint32_t *keys, int n, uint32_t key)
{
	BARRIER();
	int lo = 0, hi = n - 1;
	while (lo <= hi) {
		int mid = (lo + hi) >> 1;
		if (keys[mid] < key)
			lo = mid + 1;
		else if (keys[mid] > key)
			hi = mid - 1;
		else
			return mid;
	}
	return -1;
}

KERNEL uint32_t minmax(const uint32_t *v, int n)
{
	BARRIER();
	uint32_t lo = 0xffffffffu, hi = 0;
	for (int i = 0; i < n; i++) {
		if (v[i] < lo)
			lo = v[i];
		if (v[i] > hi)
			hi = v[i];
	}
	return hi - lo;
}

KERNEL int machine(const uint32_t *v, int n)
{
	BARRIER();
	int state = 0, count = 0;
	for (int i = 0; i < n; i++) {
		uint32_t bit = (v[i] >> 5) & 1;
		if (state == 0)
			state = bit ? 1 : 0;
		else if (state == 1)
			state = bit ? 2 : 0;
		else {
			count += bit;
			state = bit ? 2 : 1;
		}
	}
	return count;
}

#ifndef BRANCHY_NO_MAIN /* branch_chain.c includes the kernels */
int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 100;
	long acc = 0;
	for (int r = 0; r < reps; r++) {
		fill(12345);
		acc += classify(data, N);
		for (int k = 0; k < N; k += 4)
			acc += search(sorted, N, data[k] & 0xffffffu);
		acc += minmax(data, N);
		acc += machine(data, N);
	}
	printf("%ld\n", acc);
	return 0;
}
#endif
