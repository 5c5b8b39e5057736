/* CRC-32 (IEEE 802.3, reflected), bit by bit: small and slow on purpose. */
#include <stddef.h>
#include <stdint.h>

/* One more byte run through the register (static: adler32.c has its own). */
__attribute__((noinline)) static uint32_t update(uint32_t crc, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		crc ^= p[i];
		for (int bit = 0; bit < 8; bit++)
			crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
	}
	return crc;
}

uint32_t crc32_of(const unsigned char *p, size_t n)
{
	return ~update(0xffffffffu, p, n);
}
