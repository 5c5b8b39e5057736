/* A switch-heavy bytecode interpreter (compiled to a jump table) running a
 * small program with nested loops. Deterministic per repetition. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Kernels are not pure for the compiler: it must not hoist them out of the
 * repetition loop (every repetition must execute the same instructions). */
#define KERNEL __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")

enum op { PUSH, ADD, SUB, MUL, DUP, SWAP, JNZ, DEC, LOAD, STORE, XOR, SHR, POP, HALT };

struct insn {
	uint8_t op;
	int32_t arg;
};

KERNEL int64_t run(const struct insn *code, int64_t *mem)
{
	BARRIER();
	int64_t stack[64];
	int sp = 0, pc = 0;
	for (;;) {
		const struct insn *in = &code[pc++];
		switch (in->op) {
		case PUSH: stack[sp++] = in->arg; break;
		case ADD: sp--; stack[sp - 1] += stack[sp]; break;
		case SUB: sp--; stack[sp - 1] -= stack[sp]; break;
		case MUL: sp--; stack[sp - 1] *= stack[sp]; break;
		case DUP: stack[sp] = stack[sp - 1]; sp++; break;
		case SWAP: { int64_t t = stack[sp - 1]; stack[sp - 1] = stack[sp - 2]; stack[sp - 2] = t; } break;
		case JNZ: if (stack[--sp]) pc = in->arg; break;
		case DEC: stack[sp - 1]--; break;
		case LOAD: stack[sp++] = mem[in->arg]; break;
		case STORE: mem[in->arg] = stack[--sp]; break;
		case XOR: sp--; stack[sp - 1] ^= stack[sp]; break;
		case SHR: stack[sp - 1] >>= in->arg; break;
		case POP: sp--; break;
		case HALT: return sp ? stack[sp - 1] : 0;
		}
	}
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 10;
	/* mem[0] = counter; loop: acc = (acc * 3 ^ counter) >> 1 ... */
	static const struct insn prog[] = {
		{PUSH, 20000}, {STORE, 0},            /* 0: counter = 20000 */
		{PUSH, 1}, {STORE, 1},                /* 2: acc = 1 */
		{LOAD, 1}, {PUSH, 3}, {MUL, 0},       /* 4: acc * 3 */
		{LOAD, 0}, {XOR, 0}, {SHR, 1},        /* 7: ^ counter >> 1 */
		{LOAD, 0}, {ADD, 0}, {STORE, 1},      /* 10: + counter -> acc */
		{LOAD, 0}, {DEC, 0}, {DUP, 0}, {STORE, 0}, /* 13: counter-- */
		{JNZ, 4},                             /* 17 */
		{LOAD, 1}, {HALT, 0},
	};
	int64_t mem[4] = {0};
	int64_t acc = 0;
	for (int r = 0; r < reps; r++)
		acc += run(prog, mem);
	printf("%lld\n", (long long)acc);
	return 0;
}
