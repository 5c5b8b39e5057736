/* The fewest cycles a call and its return take (the machine model's
 * call_return_cycles, docs/MACHINE_MODEL.md): loops with 0 to 3 calls of a
 * two-instruction leaf per iteration, and with other work beside one call,
 * in cycles of the add-chain clock (bench/accuracy/clock.c). On Zen 5 each
 * call adds about 4.1 cycles, ten independent adds beside the call add
 * nothing and a multiply in the callee 0 to 1 cycle (5.1 in this loop; 4.1
 * with the loop's increment before the call): the pair is mostly a
 * throughput bound the code around it overlaps with. A call through a table
 * of four leaves (the machine model's indirect_call_return_cycles) took
 * 1.3-1.6 cycles more than a direct one. x86-64 only.
 * Usage: call_return */
#include "microbench.h"

__asm__(".text\n"
	"leaf_lea: lea (%rdi,%rdi,1), %rax\n ret\n"
	"leaf_imul: mov %rdi, %rax\n imul %rdi, %rax\n ret\n"
	"leaf_a: lea (%rdi,%rdi,1), %rax\n ret\n"
	"leaf_b: lea (%rdi,%rdi,1), %rax\n ret\n"
	"leaf_c: lea (%rdi,%rdi,1), %rax\n ret\n"
	"leaf_d: lea (%rdi,%rdi,1), %rax\n ret\n"
	".section .data.rel.ro\n .p2align 3\n"
	"leaf_table: .quad leaf_a, leaf_b, leaf_c, leaf_d\n"
	".text\n");

int main(void)
{
	double mhz = add_chain_mhz();
	printf("clock %.0f MHz\n", mhz);
	/* each iteration: rdi = i, then the body */
	TIME_LOOP(mhz, "no call (the leaf's lea inline)", "mov %[i], %%rdi\n lea (%%rdi,%%rdi,1), %%rax\n add %%rax, %[s]");
	TIME_LOOP(mhz, "1 call", "mov %[i], %%rdi\n call leaf_lea\n add %%rax, %[s]");
	TIME_LOOP(mhz, "2 calls", "mov %[i], %%rdi\n call leaf_lea\n add %%rax, %[s]\n call leaf_lea\n xor %%rax, %[s]");
	TIME_LOOP(mhz, "3 calls", "mov %[i], %%rdi\n call leaf_lea\n add %%rax, %[s]\n call leaf_lea\n xor %%rax, %[s]\n"
			       "call leaf_lea\n add %%rax, %[s]");
	/* through a table of four leaves (same code), the one of i & 3 */
	TIME_LOOP(mhz, "1 indirect call (table, i & 3)",
		  "mov %[i], %%rdi\n mov %[i], %%rax\n and $3, %%eax\n lea leaf_table(%%rip), %%rcx\n"
		  "call *(%%rcx,%%rax,8)\n add %%rax, %[s]");
	TIME_LOOP(mhz, "3 calls, the third indirect (table, i & 3)",
		  "mov %[i], %%rdi\n call leaf_lea\n add %%rax, %[s]\n call leaf_lea\n xor %%rax, %[s]\n"
		  "mov %[i], %%rax\n and $3, %%eax\n lea leaf_table(%%rip), %%rcx\n"
		  "call *(%%rcx,%%rax,8)\n add %%rax, %[s]");
	TIME_LOOP(mhz, "1 call, imul in the callee", "mov %[i], %%rdi\n call leaf_imul\n add %%rax, %[s]");
	TIME_LOOP(mhz, "1 call and 10 independent adds",
		  "mov %[i], %%rdi\n call leaf_lea\n add %%rax, %[s]\n add $1, %%rdx\n add $1, %%rcx\n"
		  "add $1, %%r8\n add $1, %%r9\n add $1, %%r10\n add $1, %%r11\n"
		  "add $1, %%rdx\n add $1, %%rcx\n add $1, %%r8\n add $1, %%r9");
	return 0;
}
