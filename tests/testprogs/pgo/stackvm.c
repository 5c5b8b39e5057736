/* A stack-machine interpreter, the kind of code whose hottest call is
 * indirect: a program of byte codes, generated from a seed with the skewed
 * mix of real byte code (pushes and additions most of it, an expensive hash
 * rare), run by a loop that calls each instruction's handler through a
 * table of function pointers.
 * Usage: stackvm [ROUNDS [SEED]]   prints how many times each opcode ran
 * and the checksum of the results. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum opcode { OP_PUSH, OP_ADD, OP_MUL, OP_XOR, OP_DUP, OP_HASH, OP_POP, kOpcodes };

static const char *const opcode_names[kOpcodes] = {"push", "add", "mul", "xor", "dup", "hash", "pop"};

enum { kStackDepth = 64, kProgramLength = 1 << 16 };

struct insn {
	uint8_t op;
	uint32_t arg;
};

struct vm {
	uint64_t stack[kStackDepth];
	int sp;
};

typedef void handler_fn(struct vm *vm, uint32_t arg);

static void op_push(struct vm *vm, uint32_t arg) { vm->stack[vm->sp++] = arg; }

static void op_add(struct vm *vm, uint32_t arg)
{
	(void)arg;
	vm->sp--;
	vm->stack[vm->sp - 1] += vm->stack[vm->sp];
}

static void op_mul(struct vm *vm, uint32_t arg)
{
	(void)arg;
	vm->sp--;
	vm->stack[vm->sp - 1] *= vm->stack[vm->sp] | 1;
}

static void op_xor(struct vm *vm, uint32_t arg)
{
	(void)arg;
	vm->sp--;
	vm->stack[vm->sp - 1] ^= vm->stack[vm->sp];
}

static void op_dup(struct vm *vm, uint32_t arg)
{
	(void)arg;
	vm->stack[vm->sp] = vm->stack[vm->sp - 1];
	vm->sp++;
}

/* The expensive one: SplitMix64's finalizer, ARG times (4..19). */
static void op_hash(struct vm *vm, uint32_t arg)
{
	uint64_t x = vm->stack[vm->sp - 1];
	for (uint32_t i = 0; i < arg; i++) {
		x ^= x >> 30;
		x *= 0xbf58476d1ce4e5b9ull;
		x ^= x >> 27;
		x *= 0x94d049bb133111ebull;
		x ^= x >> 31;
	}
	vm->stack[vm->sp - 1] = x;
}

static void op_pop(struct vm *vm, uint32_t arg)
{
	(void)arg;
	vm->sp--;
}

static handler_fn *const handlers[kOpcodes] = {op_push, op_add, op_mul, op_xor, op_dup, op_hash, op_pop};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* Knuth's MMIX linear congruential generator; its high 32 bits. */
static uint32_t next_random(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 32);
}

/* The next opcode of a program whose stack holds `depth` values: half of
 * byte code pushes, a quarter adds; every opcode keeps the stack within
 * bounds (a binary operation needs two values, a push room for one). */
static enum opcode pick_opcode(int depth)
{
	static const uint8_t mix[20] = {OP_PUSH, OP_PUSH, OP_PUSH, OP_PUSH, OP_PUSH, OP_PUSH, OP_PUSH, OP_PUSH,
					OP_PUSH, OP_ADD,  OP_ADD,  OP_ADD,  OP_ADD,  OP_ADD,  OP_MUL,  OP_XOR,
					OP_XOR,  OP_DUP,  OP_HASH, OP_POP};
	for (;;) {
		enum opcode op = (enum opcode)mix[next_random() % 20];
		int needs = op == OP_PUSH || op == OP_DUP ? 0 : op == OP_HASH ? 1 : 2;
		int grows = op == OP_PUSH || op == OP_DUP;
		if (depth >= needs && (!grows || depth < kStackDepth - 1) && (op != OP_POP || depth > 1))
			return op;
	}
}

static struct insn *make_program(size_t length, uint64_t counts[kOpcodes])
{
	struct insn *code = malloc(length * sizeof *code);
	if (!code) {
		perror("malloc");
		exit(1);
	}
	int depth = 0;
	for (size_t i = 0; i < length; i++) {
		enum opcode op = pick_opcode(depth);
		code[i].op = (uint8_t)op;
		code[i].arg = op == OP_HASH ? 4 + (uint32_t)(next_random() % 16) : next_random() >> 8;
		depth += op == OP_PUSH || op == OP_DUP ? 1 : op == OP_HASH ? 0 : -1;
		counts[op]++;
	}
	return code;
}

/* One run of the program: each instruction's handler through the table. */
__attribute__((noinline)) uint64_t run(const struct insn *code, size_t length)
{
	struct vm vm = {.sp = 0};
	for (size_t i = 0; i < length; i++)
		handlers[code[i].op](&vm, code[i].arg);
	uint64_t sum = 0;
	for (int i = 0; i < vm.sp; i++)
		sum += vm.stack[i];
	return sum;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 200;
	if (argc > 2)
		rng_state ^= strtoull(argv[2], NULL, 0);
	uint64_t counts[kOpcodes] = {0};
	struct insn *code = make_program(kProgramLength, counts);
	uint64_t checksum = 0;
	for (long r = 0; r < rounds; r++)
		checksum = checksum * 31 + run(code, kProgramLength);
	for (int op = 0; op < kOpcodes; op++)
		printf("%s %llu\n", opcode_names[op], (unsigned long long)(counts[op] * (uint64_t)rounds));
	printf("checksum %016llx\n", (unsigned long long)checksum);
	free(code);
	return 0;
}
