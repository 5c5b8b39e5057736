// SPDX-License-Identifier: GPL-2.0
/* The CPU-bound loop the overhead benchmarks time (bench/throughput.c,
 * bench/budget_paired.c): a pseudo-random walk over a private 1 MiB table
 * (a small hash-table probe: load, compare, store) mixed with integer
 * multiply/xor/shift work. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define THROUGHPUT_TABLE_BYTES (1u << 20)
#define THROUGHPUT_TABLE_SLOTS (THROUGHPUT_TABLE_BYTES / sizeof(uint64_t))

static inline uint64_t throughput_mix(uint64_t x) {
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* `n` iterations, numbered from `iters`, over `table`; *h and *acc carry
 * the walk's state from one call to the next. */
static inline void throughput_steps(uint64_t *table, uint64_t *h, uint64_t *acc, uint64_t iters, unsigned n) {
	uint64_t hh = *h, a = *acc;
	for (unsigned k = 0; k < n; ++k) {
		/* hash-table probe: a few linear probes from a hashed slot */
		hh = throughput_mix(hh + iters + k);
		size_t slot = hh & (THROUGHPUT_TABLE_SLOTS - 1);
		for (int p = 0; p < 4; ++p) {
			uint64_t v = table[(slot + p) & (THROUGHPUT_TABLE_SLOTS - 1)];
			if ((v & 0xff) == (hh & 0xff)) break;
			a += v;
		}
		table[slot] = hh ^ a;
		/* integer math */
		a = a * 6364136223846793005ULL + 1442695040888963407ULL;
		a ^= a >> 29;
	}
	*h = hh;
	*acc = a;
}
