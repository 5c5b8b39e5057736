/* Adler-32 (RFC 1950), with the modulo taken every byte. */
#include <stddef.h>
#include <stdint.h>

/* The two running sums packed as zlib keeps them (static: crc32.c has its own). */
__attribute__((noinline)) static uint32_t update(uint32_t adler, const unsigned char *p, size_t n)
{
	uint32_t a = adler & 0xffffu, b = adler >> 16;
	for (size_t i = 0; i < n; i++) {
		a = (a + p[i]) % 65521u;
		b = (b + a) % 65521u;
	}
	return (b << 16) | a;
}

uint32_t adler32_of(const unsigned char *p, size_t n)
{
	return update(1u, p, n);
}
