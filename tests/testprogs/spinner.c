/* Spins until killed (or for the given seconds), forking one child that spins
 * too when given "--fork": a target for `ecpi record -p`.
 * Usage: spinner [seconds] [--fork] */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

__attribute__((noinline)) void spinner_parent_loop(void)
{
	uint64_t x = sink;
	for (int i = 0; i < 100000; i++)
		x = x * 6364136223846793005ull + 3;
	sink = x;
}

__attribute__((noinline)) void spinner_child_loop(void)
{
	uint64_t x = sink;
	for (int i = 0; i < 100000; i++)
		x = x * 2862933555777941757ull + 7;
	sink = x;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 3600;
	int do_fork = argc > 2 && strcmp(argv[2], "--fork") == 0;
	double start = now();
	pid_t child = -1;
	printf("ready %d\n", getpid());
	fflush(stdout);
	if (do_fork) {
		/* Fork 1.5 s in so the child is born while being profiled. */
		while (now() - start < 1.5)
			spinner_parent_loop();
		child = fork();
		if (child == 0) {
			while (now() - start < seconds)
				spinner_child_loop();
			_exit(0);
		}
	}
	while (now() - start < seconds)
		spinner_parent_loop();
	if (child > 0)
		waitpid(child, NULL, 0);
	return 0;
}
