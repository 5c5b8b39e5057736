/* Branch misprediction: a data-dependent branch on random bits, taken half
 * the time with no pattern. The asm statements keep the compiler from
 * turning the branch into a conditional move. Each side multiplies twice
 * (a chain within the iteration, not across iterations, so the backlog does
 * not hide the refetch): unstalled issue points for frequency estimation
 * (DCPI 6.1.3). Usage: branches REPS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define N 16384

__attribute__((noinline)) uint64_t classify(const uint8_t *v, int n, uint64_t m)
{
	uint64_t acc = 0;
	for (int i = 0; i < n; i++) {
		uint64_t x = v[i];
		if (x & 1) {
			__asm__ volatile("" : "+r"(x));
			acc += (x * m) * m;
		} else {
			__asm__ volatile("" : "+r"(x));
			acc ^= ((x + 7) * m) * m;
		}
	}
	return acc;
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 4000;
	static uint8_t v[N];
	uint64_t x = 88172645463325252ull;
	for (int i = 0; i < N; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		v[i] = (uint8_t)(x >> 32);
	}
	uint64_t acc = 0;
	for (int r = 0; r < reps; r++)
		acc += classify(v, N, 0x9e3779b97f4a7c15ull + (uint64_t)argc);
	printf("%llu\n", (unsigned long long)acc);
	return 0;
}
