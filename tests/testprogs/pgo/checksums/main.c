/* Checksums of generated blocks, the way a storage tool verifies chunks:
 * a CRC-32 and an Adler-32 of each block. Two static functions share the
 * name `update` (one in crc32.c, one in adler32.c).
 * Usage: checksums [BLOCKS]   prints the checksums' xor. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

uint32_t crc32_of(const unsigned char *p, size_t n);
uint32_t adler32_of(const unsigned char *p, size_t n);

int main(int argc, char **argv)
{
	long blocks = argc > 1 ? atol(argv[1]) : 100;
	static unsigned char block[65536];
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	uint32_t crcs = 0, adlers = 0;
	for (long k = 0; k < blocks; k++) {
		for (size_t i = 0; i < sizeof block; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			block[i] = (unsigned char)(seed >> 56);
		}
		crcs ^= crc32_of(block, sizeof block);
		adlers ^= adler32_of(block, sizeof block);
	}
	printf("%ld blocks, crc32 xor %08x, adler32 xor %08x\n", blocks, crcs, adlers);
	return 0;
}
