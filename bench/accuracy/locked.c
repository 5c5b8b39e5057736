/* What locked read-modify-writes and fences cost (the machine model's
 * "atomic" class, docs/MACHINE_MODEL.md): loops of one or two locked
 * instructions, with independent adds or loads beside them, in cycles of the
 * add-chain clock (bench/accuracy/clock.c). On Zen 5 each locked instruction
 * takes 20 cycles whatever runs beside it, on the same line or another, and
 * mfence about 79. x86-64 only. Usage: locked */
#include "microbench.h"

int main(void)
{
	double mhz = add_chain_mhz();
	printf("clock %.0f MHz\n", mhz);
	TIME_LOOP(mhz, "lock add [p], 1", "lock addq $1, (%[p])");
	TIME_LOOP(mhz, "lock add [p], 1 and 12 independent adds",
		  "lock addq $1, (%[p])\n add $1, %%rax\n add $1, %%rcx\n add $1, %%rdx\n add $1, %%r8\n"
		  "add $1, %%r9\n add $1, %%r10\n add $1, %%rax\n add $1, %%rcx\n add $1, %%rdx\n add $1, %%r8\n"
		  "add $1, %%r9\n add $1, %%r10");
	TIME_LOOP(mhz, "lock add [p], 1 and 4 dependent loads",
		  "lock addq $1, (%[p])\n mov 64(%[p]), %%rax\n mov 128(%[p],%%rax), %%rax\n"
		  "mov 192(%[p],%%rax), %%rax\n mov 256(%[p],%%rax), %%rax");
	TIME_LOOP(mhz, "lock add [p], 1; lock add [p+64], 1", "lock addq $1, (%[p])\n lock addq $1, 64(%[p])");
	TIME_LOOP(mhz, "xchg [p], rax", "xchg %%rax, (%[p])");
	TIME_LOOP(mhz, "lock cmpxchg [p], rcx", "xor %%eax, %%eax\n lock cmpxchg %%rcx, (%[p])");
	TIME_LOOP(mhz, "mfence", "mfence");
	return 0;
}
