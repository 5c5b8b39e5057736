/* The second plugin of tests/testprogs/reload.c, loaded where the first one
 * was: built without a frame pointer, its hot function keeps nothing on its
 * stack (CFA = rsp + 8), at the addresses of the first plugin's hot code. */
#include <time.h>

static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static unsigned long beta_mix(unsigned long seed)
{
	unsigned long x = seed | 1;

	for (int i = 0; i < 32768; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL; /* an LCG: registers only */
	return x;
}

__attribute__((noinline)) static unsigned long beta_rounds(double end)
{
	unsigned long sum = 0;

	while (now() < end)
		sum += beta_mix(sum);
	return sum;
}

unsigned long plugin_run(double seconds)
{
	return beta_rounds(now() + seconds) + sink;
}
