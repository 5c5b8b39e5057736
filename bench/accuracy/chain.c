/* A loop with a branch chain over pseudo-random values (issue 36): a
 * histogram of a random stream by its low bits, the way a tokenizer sorts
 * characters into classes. Half of the values are odd; a quarter of the
 * even ones have bits 1-2 clear. Deterministic per repetition. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define KERNEL __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")

#define ITERATIONS 1000000

struct counts {
	uint64_t odd, aligned, other;
	uint64_t checksum;
};

KERNEL void tally(struct counts *c, uint32_t seed, int n)
{
	BARRIER();
	for (int i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		uint32_t x = seed >> 13;
		if (x & 1) {
			c->odd++;
			c->checksum += x;
		} else if ((x & 6) == 0) {
			c->aligned++;
			c->checksum ^= x << 3;
		} else {
			c->other++;
			c->checksum -= x >> 2;
		}
	}
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 10;
	struct counts c = {0};
	for (int r = 0; r < reps; r++)
		tally(&c, 12345u + (uint32_t)r, ITERATIONS);
	printf("%llu %llu %llu %llu\n", (unsigned long long)c.odd, (unsigned long long)c.aligned,
	       (unsigned long long)c.other, (unsigned long long)c.checksum);
	return 0;
}
