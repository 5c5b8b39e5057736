/* D-cache: pointer chasing through a random cycle over 64 MiB, far larger
 * than every cache level, so nearly every load misses (tests/bpf/calc_culprits.sh).
 * Each loaded pointer goes through a chain of multiplies before the next load
 * (x & zero is 0 at run time, but the hardware must wait for it): those
 * unstalled issue points are what frequency estimation needs (DCPI 6.1.3) to
 * tell a loop that runs often from one that stalls long.
 * Usage: chase STEPS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS (8u << 20) /* 8 Mi pointers = 64 MiB */

__attribute__((noinline)) void **chase(void **p, long steps, uintptr_t zero)
{
	uintptr_t x = 1;
	while (steps-- > 0) {
		uintptr_t v = (uintptr_t)*p;
		x = (x * v) * v;
		x = (x * v) * v;
		x = (x * v) * v;
		x = (x * v) * v;
		p = (void **)(v ^ (x & zero));
	}
	return p;
}

int main(int argc, char **argv)
{
	long steps = argc > 1 ? atol(argv[1]) : 20000000;
	void **slots = malloc(SLOTS * sizeof *slots);
	uint32_t *order = malloc(SLOTS * sizeof *order);
	if (!slots || !order)
		return 1;
	for (uint32_t i = 0; i < SLOTS; i++)
		order[i] = i;
	uint64_t x = 88172645463325252ull; /* xorshift: deterministic */
	for (uint32_t i = SLOTS - 1; i > 0; i--) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint32_t j = (uint32_t)(x % (i + 1));
		uint32_t t = order[i];
		order[i] = order[j], order[j] = t;
	}
	for (uint32_t i = 0; i < SLOTS; i++)
		slots[order[i]] = &slots[order[(i + 1) % SLOTS]];
	free(order);
	void **end = chase(&slots[0], steps, (uintptr_t)(argc > 2));
	printf("%td\n", end - slots);
	return 0;
}
