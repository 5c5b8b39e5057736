/* Two call chains whose inner frames sit at the same stack addresses with
 * the same return address, and whose outer frames differ (issue 29,
 * tests/bpf/record_memo.sh): the sampler's memo of the last stack's frames
 * may join a sample's walk at memo_middle's frame, and must then find that
 * the frame above it is no longer the memo's. main calls memo_left and
 * memo_right in turn, at the same sp; each calls memo_middle with its own
 * leaf, which memo_middle calls through one indirect call (one return
 * address for both). So memo_spin_left is always below memo_left and
 * memo_spin_right below memo_right: a stack that pairs them otherwise is
 * wrong. Built -O2 without frame pointers, as Debian builds.
 * Usage: memoswap SECONDS */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* About 0.1-0.3 ms each: at 999 Hz a CPU's consecutive samples fall in
 * either chain. The constants differ so the compiler keeps two functions. */
__attribute__((noinline)) void memo_spin_left(void)
{
	unsigned long x = sink;
	for (int i = 0; i < 200000; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	sink = x;
}

__attribute__((noinline)) void memo_spin_right(void)
{
	unsigned long x = sink;
	for (int i = 0; i < 200000; i++)
		x = x * 2862933555777941757ul + 3037000493ul;
	sink = x;
}

__attribute__((noinline)) void memo_middle(void (*volatile leaf)(void))
{
	leaf();
	sink += 1; /* not a tail call: memo_middle keeps its frame */
}

__attribute__((noinline)) void memo_left(void)
{
	memo_middle(memo_spin_left);
	sink += 2;
}

__attribute__((noinline)) void memo_right(void)
{
	memo_middle(memo_spin_right);
	sink += 3;
}

int main(int argc, char **argv)
{
	double end = now() + (argc > 1 ? atof(argv[1]) : 2.0);

	while (now() < end) {
		memo_left();
		memo_right();
	}
	return 0;
}
