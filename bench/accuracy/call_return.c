/* The fewest cycles a call and its return take (the machine model's
 * call_return_cycles, docs/MACHINE_MODEL.md): loops with 0 to 3 calls of a
 * two-instruction leaf per iteration, and with other work beside one call,
 * in cycles of the add-chain clock (bench/accuracy/clock.c). On Zen 5 each
 * call adds about 4.1 cycles, and a multiply in the callee or ten
 * independent adds beside the call add nothing: the pair is a throughput
 * bound the code around it overlaps with. x86-64 only. Usage: call_return */
#include <stdio.h>
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__asm__(".text\n"
	"leaf_lea: lea (%rdi,%rdi,1), %rax\n ret\n"
	"leaf_imul: mov %rdi, %rax\n imul %rdi, %rax\n ret\n");

#define ITERATIONS 100000000L
#define TIME(name, body)                                                                        \
	do {                                                                                    \
		long n = ITERATIONS, s = 0, i = 0;                                              \
		double a = now();                                                               \
		__asm__ volatile("1: mov %[i], %%rdi\n add $1, %[i]\n" body "\n cmp %[n], %[i]\n jne 1b" \
				 : [s] "+r"(s), [i] "+r"(i)                                     \
				 : [n] "r"(n)                                                   \
				 : "rdi", "rax", "rdx", "rcx", "r8", "r9", "r10", "r11", "memory");     \
		printf("%-34s %.2f cycles per iteration\n", name, (now() - a) * mhz * 1e6 / ITERATIONS); \
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
	TIME("no call (the leaf's lea inline)", "lea (%%rdi,%%rdi,1), %%rax\n add %%rax, %[s]");
	TIME("1 call", "call leaf_lea\n add %%rax, %[s]");
	TIME("2 calls", "call leaf_lea\n add %%rax, %[s]\n call leaf_lea\n xor %%rax, %[s]");
	TIME("3 calls", "call leaf_lea\n add %%rax, %[s]\n call leaf_lea\n xor %%rax, %[s]\n"
			"call leaf_lea\n add %%rax, %[s]");
	TIME("1 call, imul in the callee", "call leaf_imul\n add %%rax, %[s]");
	TIME("1 call and 10 independent adds", "call leaf_lea\n add %%rax, %[s]\n add $1, %%rdx\n add $1, %%rcx\n"
					       "add $1, %%r8\n add $1, %%r9\n add $1, %%r10\n add $1, %%r11\n"
					       "add $1, %%rdx\n add $1, %%rcx\n add $1, %%r8\n add $1, %%r9");
	return 0;
}
