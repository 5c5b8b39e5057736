/* A loop with an 8-way switch over pseudo-random opcodes (issue 36): a
 * small virtual machine's register file updated by random instructions,
 * each opcode as often as the others. gcc -O2 compiles the switch to a
 * jump table. Deterministic per repetition. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define KERNEL __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")

#define ITERATIONS 1000000

KERNEL uint64_t execute(uint64_t *regs, uint32_t seed, int n)
{
	BARRIER();
	for (int i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		uint32_t op = seed >> 29, a = (seed >> 8) & 7, b = (seed >> 16) & 7;
		switch (op) {
		case 0: regs[a] += regs[b]; break;
		case 1: regs[a] -= regs[b] + 1; break;
		case 2: regs[a] ^= regs[b] << 1; break;
		case 3: regs[a] = regs[b] * 3 + 7; break;
		case 4: regs[a] |= (uint64_t)seed << 4; break;
		case 5: regs[a] &= regs[b] | 0xff; break;
		case 6: regs[a] = regs[b] >> 3; break;
		case 7: regs[b] = regs[a] + i; break;
		}
	}
	return regs[0] ^ regs[7];
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 10;
	uint64_t regs[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	uint64_t acc = 0;
	for (int r = 0; r < reps; r++)
		acc += execute(regs, 777u + (uint32_t)r, ITERATIONS);
	printf("%llu\n", (unsigned long long)acc);
	return 0;
}
