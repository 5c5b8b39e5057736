/* What locked read-modify-writes and fences cost (the machine model's
 * "atomic" class, docs/MACHINE_MODEL.md): loops of one or two locked
 * instructions, with independent adds or loads beside them, in cycles of the
 * add-chain clock (bench/accuracy/clock.c). On Zen 5 each locked instruction
 * takes 20 cycles whatever runs beside it, on the same line or another, and
 * mfence about 79. x86-64 only. Usage: locked */
#include <stdio.h>
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static long mem[64] __attribute__((aligned(64)));

#define ITERATIONS 20000000L
#define TIME(name, body)                                                                             \
	do {                                                                                         \
		long n = ITERATIONS, *p = mem;                                                       \
		double a = now();                                                                    \
		__asm__ volatile("1:\n" body "\n sub $1, %[n]\n jnz 1b"                              \
				 : [n] "+r"(n)                                                       \
				 : [p] "r"(p)                                                        \
				 : "rax", "rcx", "rdx", "r8", "r9", "r10", "memory", "cc");          \
		printf("%-42s %.1f cycles per iteration\n", name, (now() - a) * mhz * 1e6 / ITERATIONS); \
	} while (0)

int main(void)
{
	double mhz;
	{
		long n = 50000000, x = 0, one = 1;
		double a = now();
		__asm__ volatile("1: add %2, %0\n add %2, %0\n add %2, %0\n add %2, %0\n"
				 " add %2, %0\n add %2, %0\n add %2, %0\n add %2, %0\n"
				 " sub $1, %1\n jnz 1b"
				 : "+r"(x), "+r"(n)
				 : "r"(one));
		mhz = 8 * 50000000.0 / (now() - a) / 1e6;
	}
	printf("clock %.0f MHz\n", mhz);
	TIME("lock add [p], 1", "lock addq $1, (%[p])");
	TIME("lock add [p], 1 and 12 independent adds",
	     "lock addq $1, (%[p])\n add $1, %%rax\n add $1, %%rcx\n add $1, %%rdx\n add $1, %%r8\n"
	     "add $1, %%r9\n add $1, %%r10\n add $1, %%rax\n add $1, %%rcx\n add $1, %%rdx\n add $1, %%r8\n"
	     "add $1, %%r9\n add $1, %%r10");
	TIME("lock add [p], 1 and 4 dependent loads", "lock addq $1, (%[p])\n mov 64(%[p]), %%rax\n"
						      "mov 128(%[p],%%rax), %%rax\n mov 192(%[p],%%rax), %%rax\n"
						      "mov 256(%[p],%%rax), %%rax");
	TIME("lock add [p], 1; lock add [p+64], 1", "lock addq $1, (%[p])\n lock addq $1, 64(%[p])");
	TIME("xchg [p], rax", "xchg %%rax, (%[p])");
	TIME("lock cmpxchg [p], rcx", "xor %%eax, %%eax\n lock cmpxchg %%rcx, (%[p])");
	TIME("mfence", "mfence");
	return 0;
}
