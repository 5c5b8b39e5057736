/* Store buffer: one store per 64-byte line over 256 MiB, so every store
 * misses and the store buffer fills; nothing is loaded. The stored value
 * comes from a chain of multiplies: unstalled issue points that frequency
 * estimation needs (DCPI 6.1.3). Usage: stores PASSES */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BYTES (256u << 20)

__attribute__((noinline)) void scatter(uint64_t *buf, uint64_t n, uint64_t v)
{
	for (uint64_t i = 0; i < n; i += 8) {
		v = v * 0x9e3779b97f4a7c15ull + i;
		buf[i] = v;
	}
}

int main(int argc, char **argv)
{
	int passes = argc > 1 ? atoi(argv[1]) : 6;
	uint64_t *buf = malloc(BYTES);
	if (!buf)
		return 1;
	memset(buf, 1, BYTES); /* fault the pages in before the measured passes */
	for (int p = 0; p < passes; p++)
		scatter(buf, BYTES / sizeof *buf, (uint64_t)p);
	printf("%llu\n", (unsigned long long)buf[BYTES / sizeof *buf / 2]);
	return 0;
}
