/* A hand-written assembly routine without CFI, called from C, in an
 * executable linked at a fixed address (not PIE) and built -O2 without frame
 * pointers (tests/bpf/record_nocfi.sh). The routine, nocfi_checksum
 * (nocfi_checksum.S), burns the CPU; it keeps a frame pointer but has no
 * FDE, so the sampler walks its one frame by rbp and the rest by CFI:
 *   _start -> __libc_start_main -> main -> nocfi_sum_buffer -> nocfi_checksum
 * nocfi_sum_buffer fills a buffer on its own stack, so the word above its
 * return address is data, not a return address.
 * Usage: nocfi SECONDS */
#include <stdlib.h>
#include <time.h>

#define NWORDS 64
#define ROUNDS 20000

/* words[0 .. n) summed `rounds` times, rotating (nocfi_checksum.S); n > 0. */
unsigned long nocfi_checksum(const unsigned long *words, unsigned long n, unsigned long rounds);

static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long nocfi_sum_buffer(unsigned long seed)
{
	unsigned long words[NWORDS];
	unsigned long sum;

	for (int i = 0; i < NWORDS; i++)
		words[i] = (seed & 0xff) + (unsigned long)i; /* small numbers: never a code address */
	sum = nocfi_checksum(words, NWORDS, ROUNDS);
	sink += words[NWORDS / 2]; /* the buffer lives past the call: not a tail call */
	return sum;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 2.0;
	double end = now() + seconds;

	while (now() < end)
		sink += nocfi_sum_buffer(sink);
	return 0;
}
