/* Calls in loops: small non-inlined functions, a function pointer table and
 * recursion. Deterministic per repetition. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Kernels are not pure for the compiler: it must not hoist them out of the
 * repetition loop (every repetition must execute the same instructions). */
#define KERNEL __attribute__((noinline))
#define BARRIER() __asm__ volatile("" ::: "memory")

KERNEL int64_t square(int64_t x) { BARRIER(); return x * x; }
KERNEL int64_t twice(int64_t x) { BARRIER(); return x + x; }
KERNEL int64_t clamp(int64_t x) { BARRIER(); return x > 1000 ? 1000 : x < -1000 ? -1000 : x; }

static int64_t (*const table[3])(int64_t) = {square, twice, clamp};

KERNEL int64_t fib(int n) { BARRIER(); return n < 2 ? n : fib(n - 1) + fib(n - 2); }

KERNEL int64_t caller(int n)
{
	BARRIER();
	int64_t s = 0;
	for (int i = 0; i < n; i++) {
		s += square(i & 255);
		s += clamp(s);
		s ^= table[i % 3](i);
	}
	return s;
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 10;
	int64_t acc = 0;
	for (int r = 0; r < reps; r++) {
		acc += caller(100000);
		acc += fib(20);
	}
	printf("%lld\n", (long long)acc);
	return 0;
}
