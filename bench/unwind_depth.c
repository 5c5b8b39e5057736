/* bench/unwind.sh: a stack of a chosen depth for the BPF handler's time per
 * sample at 10, 30 and 100 frames. The process's own frames burn CPU at the
 * bottom of a recursion, so nearly every sample sees the same depth: DEPTH
 * user frames in all, counting _start, __libc_start_main,
 * __libc_start_call_main and main (4 frames). Built -O2 with frame pointers,
 * so that --call-graph fp walks the same frames as CFI.
 * Usage: ecpi_bench_unwind_depth DEPTH SECONDS */
#include <stdlib.h>
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

int main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : 30;
	double end = now() + (argc > 2 ? atof(argv[2]) : 2.0);
	int own = depth - 5; /* _start, libc x2, main, then own recursion frames + the leaf */

	if (own < 1)
		own = 1;
	while (now() < end)
		sink += depth_recurse(own, sink);
	return 0;
}
