/* Pointer chasing: a list in L1, and a list spread over 16 MiB in random
 * order (cache and TLB misses: dynamic stalls DCPI's heuristics must see
 * through). Deterministic per repetition. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Kernels are not pure for the compiler: it must not hoist them out of the
 * repetition loop (every repetition must execute the same instructions). */
#define KERNEL __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")

struct node {
	struct node *next;
	int64_t value;
};

#define SMALL 256
#define BIG (1 << 20)
static struct node small[SMALL];
static struct node *big;

KERNEL int64_t walk(struct node *p, long steps)
{
	BARRIER();
	int64_t s = 0;
	for (long i = 0; i < steps; i++) {
		s += p->value;
		p = p->next;
	}
	return s;
}

KERNEL int64_t walk_until(struct node *p)
{
	BARRIER();
	int64_t s = 0;
	while (p) {
		s ^= p->value + 1;
		p = p->next;
	}
	return s;
}

static void link_random(struct node *v, long n, uint64_t seed)
{
	long *perm = malloc(sizeof(long) * (size_t)n);
	for (long i = 0; i < n; i++)
		perm[i] = i;
	for (long i = n - 1; i > 0; i--) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		long j = (long)((seed >> 33) % (uint64_t)(i + 1));
		long t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (long i = 0; i < n; i++) {
		v[perm[i]].next = i + 1 < n ? &v[perm[i + 1]] : NULL;
		v[perm[i]].value = perm[i];
	}
	free(perm);
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 10;
	big = malloc(sizeof(struct node) * BIG);
	link_random(small, SMALL, 1);
	small[SMALL - 1].next = &small[0];
	link_random(big, BIG, 2);
	long head = 0;
	for (long i = 0; i < BIG; i++)
		if (big[i].value == 0)
			head = i;
	int64_t acc = 0;
	for (int r = 0; r < reps; r++) {
		acc += walk(&small[0], 2000000);
		acc += walk_until(&big[head]);
	}
	printf("%lld\n", (long long)acc);
	return 0;
}
