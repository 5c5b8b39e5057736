// SPDX-License-Identifier: GPL-2.0
/* CPU-bound workload that reports its own throughput, for bench/overhead.sh.
 *
 * Usage: ecpi_bench_throughput SECONDS [WORKERS]
 *
 * Forks WORKERS processes (default: the number of online CPUs). Each one runs
 * a fixed loop for SECONDS: a pseudo-random walk over a private 1 MiB table
 * (a small hash-table probe: load, compare, store) mixed with integer
 * multiply/xor/shift work. Each worker measures its own iterations per second
 * against CLOCK_MONOTONIC; the parent prints the sum over workers, in
 * iterations per second, as a single number on stdout. On stderr it prints
 * one line "# workers=N cpu_seconds=X iterations=I": the CPU time the workers
 * used (which bench/overhead.sh compares with /proc/stat to notice other
 * processes) and their total iterations. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "throughput_loop.h"

#define CHECK_EVERY 4096u /* iterations between clock reads (vDSO, cheap) */

static double now_s(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Returns iterations per second of this worker. */
static double run_worker(double seconds, unsigned seed, double *iterations) {
	uint64_t *table = malloc(THROUGHPUT_TABLE_BYTES);
	if (!table) return -1;
	for (size_t i = 0; i < THROUGHPUT_TABLE_SLOTS; ++i) table[i] = throughput_mix(i + seed);

	uint64_t iters = 0, acc = seed, h = seed;
	double start = now_s(), end = start + seconds, t = start;
	for (;;) {
		throughput_steps(table, &h, &acc, iters, CHECK_EVERY);
		iters += CHECK_EVERY;
		t = now_s();
		if (t >= end) break;
	}
	/* keep the result observable so the loop is not optimised away */
	if (acc == 42 && table[0] == 42) fputc('\0', stderr);
	free(table);
	*iterations = (double)iters;
	return (double)iters / (t - start);
}

int main(int argc, char **argv) {
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: %s SECONDS [WORKERS]\n", argv[0]);
		return 2;
	}
	double seconds = strtod(argv[1], NULL);
	long workers = argc == 3 ? strtol(argv[2], NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
	if (!(seconds > 0) || workers < 1 || workers > 4096) {
		fprintf(stderr, "%s: bad SECONDS or WORKERS\n", argv[0]);
		return 2;
	}

	/* A script may start us with SIGINT ignored (background job): take the
	 * default actions back, and make every worker die with us. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	pid_t parent = getpid();

	int fds[2];
	if (pipe(fds) != 0) {
		perror("pipe");
		return 1;
	}
	pid_t *pids = calloc((size_t)workers, sizeof(pid_t));
	if (!pids) return 1;
	for (long w = 0; w < workers; ++w) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			for (long j = 0; j < w; ++j) kill(pids[j], SIGKILL);
			return 1;
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent) _exit(1);
			close(fds[0]);
			double res[2]; /* iterations per second, iterations */
			res[0] = run_worker(seconds, (unsigned)(w * 7919 + 1), &res[1]);
			ssize_t n = write(fds[1], res, sizeof res); /* atomic: < PIPE_BUF */
			_exit(n == (ssize_t)sizeof res && res[0] > 0 ? 0 : 1);
		}
		pids[w] = pid;
	}
	close(fds[1]);

	double total = 0, iterations = 0, res[2];
	long got = 0;
	ssize_t n;
	while ((n = read(fds[0], res, sizeof res)) == (ssize_t)sizeof res || (n < 0 && errno == EINTR))
		if (n > 0) {
			total += res[0];
			iterations += res[1];
			++got;
		}
	int failed = 0;
	for (long w = 0; w < workers; ++w) {
		int status;
		if (waitpid(pids[w], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
	}
	free(pids);
	if (failed || got != workers) {
		fprintf(stderr, "%s: %ld of %ld workers reported\n", argv[0], got, workers);
		return 1;
	}
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	fprintf(stderr, "# workers=%ld cpu_seconds=%.6f iterations=%.0f\n", workers,
	        (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	            (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
	        iterations);
	printf("%.0f\n", total);
	return 0;
}
