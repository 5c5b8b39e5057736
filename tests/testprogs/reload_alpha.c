/* The first plugin of tests/testprogs/reload.c: built with a frame pointer,
 * its hot function keeps a 4 KiB table on its stack (CFA = rbp + 16 all
 * through its body, the return address 4 KiB above rsp). */
#include <time.h>

#define NWORDS 512

static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static unsigned long alpha_checksum(unsigned long seed)
{
	unsigned long table[NWORDS];
	unsigned long sum = 0;

	for (int i = 0; i < NWORDS; i++)
		table[i] = (seed + (unsigned long)i) & 0xff; /* small numbers: never a code address */
	for (int round = 0; round < 64; round++)
		for (int i = 0; i < NWORDS; i++)
			sum = (sum << 1 | sum >> 63) ^ table[(i * 7 + round) % NWORDS];
	sink += table[NWORDS / 2];
	return sum;
}

__attribute__((noinline)) static unsigned long alpha_rounds(double end)
{
	unsigned long sum = 0;

	while (now() < end)
		sum += alpha_checksum(sum);
	return sum;
}

unsigned long plugin_run(double seconds)
{
	return alpha_rounds(now() + seconds) + sink;
}
