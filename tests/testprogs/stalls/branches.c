/* Branch misprediction: a data-dependent branch on random bits, taken half
 * the time with no pattern. The bits come from an xorshift generator kept in
 * registers, not from memory, so no load in the loop can be a D-cache or
 * DTLB candidate where the refetch stall lands (an array of random bytes
 * made the block after the join list both on some runs). The asm statements
 * keep the compiler from turning the branch into a conditional move. Each
 * side multiplies twice (a chain within the iteration, not across
 * iterations, so the backlog does not hide the refetch): unstalled issue
 * points for frequency estimation (DCPI 6.1.3). Usage: branches REPS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define N 16384

__attribute__((noinline)) uint64_t classify(uint64_t *state, int n, uint64_t m)
{
	uint64_t acc = 0, r = *state; /* continues across calls: no repeated pattern */
	for (int i = 0; i < n; i++) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		uint64_t x = r >> 32;
		if (x & 1) {
			__asm__ volatile("" : "+r"(x));
			acc += (x * m) * m;
		} else {
			__asm__ volatile("" : "+r"(x));
			acc ^= ((x + 7) * m) * m;
		}
	}
	*state = r;
	return acc;
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 4000;
	uint64_t state = 88172645463325252ull;
	uint64_t acc = 0;
	for (int r = 0; r < reps; r++)
		acc += classify(&state, N, 0x9e3779b97f4a7c15ull + (uint64_t)argc);
	printf("%llu\n", (unsigned long long)acc);
	return 0;
}
