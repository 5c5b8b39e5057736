/* Latencies and throughputs of the instruction classes a machine model
 * (analyze/calc/machine/, docs/MACHINE_MODEL.md) gives numbers for, measured
 * the way the model is meant to be filled in: dependent chains for a class's
 * latency, independent instructions for how many units execute it. Eight
 * instructions per iteration, so the loop's own add/cmp/jne (one fused ALU
 * uop and a branch) hides under them; figures are cycles of the add-chain
 * clock per step. x86-64 only (SSE2 for the floating-point rows).
 * Usage: latency */
#include "microbench.h"

#define X8(s) s "\n" s "\n" s "\n" s "\n" s "\n" s "\n" s "\n" s "\n"

/* Every body is eight steps: eight instructions, or eight of the pairs or
 * sequences the row names. */
#define PER_STEP(mhz, name, body) TIME_LOOP_PER(mhz, 8, "step", name, body)

int main(void)
{
	double mhz = add_chain_mhz();
	printf("clock %.0f MHz\n", mhz);
	/* latency: every instruction depends on the one before */
	PER_STEP(mhz, "lat add r,r", X8("add %%rcx, %[s]"));
	/* a word that points at itself, stored once: a store in the loop would
	 * be forwarded (Zen 3 and 4 rename memory), not loaded */
	microbench_memory[0] = (long)&microbench_memory[0];
	/* The chain is carried across iterations through s (always 0): lea
	 * (1 cycle), eight loads, sub (1 cycle); (8 x latency + 2) / 8 */
	PER_STEP(mhz, "lat load (mov r,[r]), + 0.25 of the chain",
		  "lea (%[p],%[s]), %%rax\n" X8("mov (%%rax), %%rax") "sub %[p], %%rax\n mov %%rax, %[s]");
	PER_STEP(mhz, "lat imul r,r", "mov $1, %%rcx\n" X8("imul %%rcx, %[s]"));
	PER_STEP(mhz, "lat lea r,[r+r*2+1]", X8("lea 1(%[s],%[s],2), %[s]"));
	PER_STEP(mhz, "lat shl r,1", X8("shl $1, %[s]"));
	PER_STEP(mhz, "lat cmov + eliminated mov, a pair", "mov $1, %%rcx\n test %%rcx, %%rcx\n" X8("cmovnz %[s], %%rax\n mov %%rax, %[s]"));
	PER_STEP(mhz, "lat div r64 (small operands) + add, a step",
		  "mov $1000, %%rax\n" X8("xor %%edx, %%edx\n mov $3, %%rcx\n div %%rcx\n add $1000, %%rax"));
	PER_STEP(mhz, "lat addsd", "xorpd %%xmm0, %%xmm0\n" X8("addsd %%xmm0, %%xmm1"));
	PER_STEP(mhz, "lat mulsd", "xorpd %%xmm0, %%xmm0\n" X8("mulsd %%xmm0, %%xmm1"));
	PER_STEP(mhz, "lat store + load (forwarded), a pair", "mov %[p], %%rax\n" X8("mov %[s], 8(%%rax)\n mov 8(%%rax), %[s]"));
	/* throughput: independent instructions, as many at once as there are units */
	PER_STEP(mhz, "tput add (8 chains)",
		  "add $1, %%rax\n add $1, %%rcx\n add $1, %%rdx\n add $1, %%rdi\n"
		  "add $1, %%r8\n add $1, %%r9\n add $1, %%r10\n add $1, %%r11");
	PER_STEP(mhz, "tput load (8 independent)", X8("mov 8(%[p]), %%rax"));
	PER_STEP(mhz, "tput store (8 independent)", X8("mov %%rcx, 8(%[p])"));
	PER_STEP(mhz, "tput imul (8 independent)", X8("imul $3, %%rcx, %%rax"));
	PER_STEP(mhz, "tput shl (8 chains)",
		  "shl $1, %%rax\n shl $1, %%rcx\n shl $1, %%rdx\n shl $1, %%rdi\n"
		  "shl $1, %%r8\n shl $1, %%r9\n shl $1, %%r10\n shl $1, %%r11");
	PER_STEP(mhz, "tput lea (8 chains)",
		  "lea 1(%%rax), %%rax\n lea 1(%%rcx), %%rcx\n lea 1(%%rdx), %%rdx\n lea 1(%%rdi), %%rdi\n"
		  "lea 1(%%r8), %%r8\n lea 1(%%r9), %%r9\n lea 1(%%r10), %%r10\n lea 1(%%r11), %%r11");
	PER_STEP(mhz, "tput taken jmp (8)", X8("jmp 2f\n 2:"));
	PER_STEP(mhz, "tput addsd (8 chains)",
		  "addsd %%xmm8, %%xmm0\n addsd %%xmm8, %%xmm1\n addsd %%xmm8, %%xmm2\n addsd %%xmm8, %%xmm3\n"
		  "addsd %%xmm8, %%xmm4\n addsd %%xmm8, %%xmm5\n addsd %%xmm8, %%xmm6\n addsd %%xmm8, %%xmm7");
	return 0;
}
