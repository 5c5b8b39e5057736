/* bench/unwind.sh: a stack of a chosen depth for the BPF handler's time per
 * sample at 10, 30 and 100 frames. The process's own frames burn CPU at the
 * bottom of a call chain, so nearly every sample sees the same depth: DEPTH
 * user frames in all, counting _start, __libc_start_main,
 * __libc_start_call_main and main (4 frames). Built -O2 with frame pointers,
 * so that --call-graph fp walks the same frames as CFI.
 *
 * Two shapes: "recursion" (the default) is one function calling itself, so
 * every frame has the same return address; "chain" is up to 128 distinct
 * functions, each calling the next, so every frame has its own return
 * address and its own CFI row (as in most real stacks, where consecutive
 * frames are different functions).
 * Usage: ecpi_bench_unwind_depth DEPTH SECONDS [recursion|chain] */
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long depth_leaf(unsigned long x)
{
	for (int i = 0; i < 5000000; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	return x;
}

__attribute__((noinline)) unsigned long depth_recurse(int frames, unsigned long x)
{
	unsigned long r = frames <= 1 ? depth_leaf(x) : depth_recurse(frames - 1, x + 1);
	sink += r; /* not a tail call */
	return r;
}

/* The chain: 128 functions chain_<7 binary digits>, each adding its own
 * constant (its name's digits read as an octal literal) so that no two have
 * the same code; frame k calls chain[k - 1]. */
typedef unsigned long (*chain_fn)(int frames, unsigned long x);
extern chain_fn const chain[128];
#define LINK(n)                                                                                \
	__attribute__((noinline)) static unsigned long chain_##n(int frames, unsigned long x) \
	{                                                                                      \
		unsigned long r = frames <= 1 ? depth_leaf(x) : chain[(frames - 1) & 127](frames - 1, x + 0##n##u); \
		sink += r;                                                                     \
		return r;                                                                      \
	}
#define LINK2(n) LINK(n##0) LINK(n##1)
#define LINK4(n) LINK2(n##0) LINK2(n##1)
#define LINK8(n) LINK4(n##0) LINK4(n##1)
#define LINK16(n) LINK8(n##0) LINK8(n##1)
#define LINK32(n) LINK16(n##0) LINK16(n##1)
#define LINK64(n) LINK32(n##0) LINK32(n##1)
LINK64(0)
LINK64(1)
#define NAME(n) chain_##n,
#define NAME2(n) NAME(n##0) NAME(n##1)
#define NAME4(n) NAME2(n##0) NAME2(n##1)
#define NAME8(n) NAME4(n##0) NAME4(n##1)
#define NAME16(n) NAME8(n##0) NAME8(n##1)
#define NAME32(n) NAME16(n##0) NAME16(n##1)
#define NAME64(n) NAME32(n##0) NAME32(n##1)
chain_fn const chain[128] = {NAME64(0) NAME64(1)};

int main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : 30;
	double end = now() + (argc > 2 ? atof(argv[2]) : 2.0);
	int use_chain = argc > 3 && strcmp(argv[3], "chain") == 0;
	int own = depth - 5; /* _start, libc x2, main, then own frames + the leaf */

	if (own < 1)
		own = 1;
	if (own > 128)
		own = 128;
	while (now() < end)
		sink += use_chain ? chain[own & 127](own, sink) : depth_recurse(own, sink);
	return 0;
}
