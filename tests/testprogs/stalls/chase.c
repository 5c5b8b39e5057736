/* D-cache: the plain pointer chase, `for (i = 0; i < steps; i++) p = next[p];`,
 * through one random cycle over 32 MiB, far larger than every cache level, so
 * nearly every load misses (tests/bpf/calc_culprits.sh, calc_chase.sh). The
 * loop has one issue point: every cycle lands after the load, so placement
 * alone cannot tell how often it ran (DCPI 6.1); its count comes from
 * register progress.
 * Usage: chase STEPS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOTS (8u << 20) /* 8 Mi indices = 32 MiB */

__attribute__((noinline)) unsigned chase(const unsigned *next, unsigned p, long steps)
{
	for (long i = 0; i < steps; i++)
		p = next[p];
	return p;
}

/* Sattolo's shuffle: one cycle through every slot. */
static void random_cycle(unsigned *next, unsigned n)
{
	unsigned *order = malloc(n * sizeof *order);
	if (!order)
		exit(1);
	for (unsigned i = 0; i < n; i++)
		order[i] = i;
	uint64_t x = 88172645463325252ull; /* xorshift: deterministic */
	for (unsigned i = n - 1; i > 0; i--) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		unsigned j = (unsigned)(x % i);
		unsigned t = order[i];
		order[i] = order[j], order[j] = t;
	}
	for (unsigned i = 0; i < n; i++)
		next[order[i]] = order[(i + 1) % n];
	free(order);
}

int main(int argc, char **argv)
{
	long steps = argc > 1 ? atol(argv[1]) : 20000000;
	unsigned *next = malloc(SLOTS * sizeof *next);
	if (!next)
		return 1;
	random_cycle(next, SLOTS);
	printf("%u\n", chase(next, 0, steps));
	return 0;
}
