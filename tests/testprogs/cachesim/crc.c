// A hot small table: table-driven CRC-32 (the 1 KiB table stays in the L1)
// over a buffer that streams past it.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint32_t crc_table[256];

static void crc32_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc32(uint32_t crc, const unsigned char *p, size_t len)
{
	crc = ~crc;
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

int main(int argc, char **argv)
{
	size_t len = argc > 1 ? strtoull(argv[1], 0, 10) : 4 << 20;
	int rounds = argc > 2 ? atoi(argv[2]) : 2;
	unsigned char *buf = malloc(len);
	if (!buf)
		return 1;
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(i * 131 + (i >> 9));
	crc32_init();
	uint32_t crc = 0;
	for (int r = 0; r < rounds; r++)
		crc = crc32(crc, buf, len);
	printf("crc: len=%zu crc=%08x\n", len, crc);
	free(buf);
	return 0;
}
