// SPDX-License-Identifier: GPL-2.0
/* Longest pause: a single-threaded CPU-bound loop that counts its iterations
 * in 10 ms windows of CLOCK_MONOTONIC for SECONDS, then prints the median
 * window rate, the slowest window's rate as a fraction of the median, and how
 * many windows fell under 50% of the median. bench/daemon.sh runs it while
 * the daemon drains and merges, to see whether a merge is a burst a user
 * would notice.
 *
 * Usage: ecpi_bench_pause SECONDS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define WINDOW_NS 10000000ull

volatile uint64_t pause_sink;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 10.0;
	size_t n = (size_t)(seconds * 1e9 / WINDOW_NS);
	uint64_t *counts = calloc(n, sizeof(*counts));
	uint64_t *sorted = calloc(n, sizeof(*sorted));
	if (!counts || !sorted || n < 10) {
		fprintf(stderr, "usage: %s SECONDS (at least 0.1)\n", argv[0]);
		return 2;
	}
	uint64_t x = 88172645463325252ull, start = now_ns();
	for (;;) {
		for (int i = 0; i < 2000; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		pause_sink = x;
		uint64_t w = (now_ns() - start) / WINDOW_NS;
		if (w >= n)
			break;
		counts[w]++;
	}
	for (size_t i = 0; i < n; i++)
		sorted[i] = counts[i];
	qsort(sorted, n, sizeof(*sorted), cmp_u64);
	uint64_t median = sorted[n / 2], slowest = sorted[0];
	size_t under_half = 0;
	for (size_t i = 0; i < n; i++)
		under_half += counts[i] * 2 < median;
	printf("windows=%zu median=%llu slowest_fraction=%.3f under_half=%zu\n", n, (unsigned long long)median,
	       median ? (double)slowest / (double)median : 0.0, under_half);
	return 0;
}
