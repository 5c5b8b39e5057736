/* Divider: a chain of dependent 64-bit divisions (each quotient feeds the
 * next dividend), so the divider's latency is all the loop does.
 * Usage: divchain STEPS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) uint64_t divide(uint64_t x, uint64_t d, long steps)
{
	for (long i = 0; i < steps; i++)
		x = x / d + 0x123456789abcdefull;
	return x;
}

int main(int argc, char **argv)
{
	long steps = argc > 1 ? atol(argv[1]) : 50000000;
	/* The divisor comes from the command line's length: unknown to the compiler. */
	uint64_t d = 3 + (uint64_t)(argc > 2 ? atoi(argv[2]) : 0);
	printf("%llu\n", (unsigned long long)divide(0xfedcba9876543210ull, d, steps));
	return 0;
}
