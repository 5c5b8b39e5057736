// Random accesses within a cache level: a Bloom filter whose bit array
// (a global, 256 KiB by default) fits the L2 but not the L1. Keys are
// inserted, then members and non-members are queried.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BLOOM_BITS (1u << 21) /* 256 KiB */
#define BLOOM_HASHES 4

static uint64_t bloom_bits[BLOOM_BITS / 64];

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static void bloom_add(uint64_t key)
{
	uint64_t h = mix(key), step = mix(h) | 1;
	for (int i = 0; i < BLOOM_HASHES; i++, h += step)
		bloom_bits[(h % BLOOM_BITS) / 64] |= 1ULL << (h % 64);
}

static int bloom_maybe_contains(uint64_t key)
{
	uint64_t h = mix(key), step = mix(h) | 1;
	for (int i = 0; i < BLOOM_HASHES; i++, h += step)
		if (!(bloom_bits[(h % BLOOM_BITS) / 64] & (1ULL << (h % 64))))
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], 0, 10) : 200000;
	for (uint64_t k = 0; k < n; k++)
		bloom_add(k * 2654435761u);
	uint64_t hits = 0, false_positives = 0;
	for (int round = 0; round < 4; round++)
		for (uint64_t k = 0; k < n; k++) {
			hits += bloom_maybe_contains(k * 2654435761u);
			false_positives += bloom_maybe_contains(k * 2654435761u + 1);
		}
	printf("bloom: n=%llu hits=%llu false_positives=%llu\n", (unsigned long long)n, (unsigned long long)hits,
	       (unsigned long long)false_positives);
	return 0;
}
