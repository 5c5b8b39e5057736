// SPDX-License-Identifier: GPL-2.0
/* The overhead budget measured in pairs (issue 35, bench/budget.sh's
 * workload "p"): what a running `ecpi daemon` costs a CPU-bound program,
 * with the program's speed compared between adjacent slices of the same run
 * instead of between separate runs.
 *
 * Usage: ecpi_bench_budget_paired DAEMON_PID SECONDS SLICE_MS   (root)
 *
 * Why: separate runs of the same program on this VM differ by 2-18% from
 * one 8 s run to the next (bench/budget.sh's noise floor, median 2.6%), so
 * twelve rounds cannot tell a 1% loss from a 2% one. Here the daemon runs
 * throughout; this program takes copies of its sampling events
 * (pidfd_getfd: the same perf events, the same BPF handler, the same ring
 * buffers) and switches them off and on at slice boundaries, in pairs of
 * adjacent slices whose order is drawn at random per pair. One worker per
 * CPU (bench/throughput.c's loop: a random read-modify-write walk over a
 * private 1 MiB table with integer work) counts its iterations and its own
 * CPU time per slice. A pair's loss is 1 - (iterations per CPU second with
 * sampling on) / (the same with sampling off); slow drifts of the VM's speed
 * cancel within a pair.
 *
 * Which events: every perf event of the daemon whose count advances while
 * the workers run (its cpu-clock events, one per CPU); its side-band events
 * (mmap and task records, which count nothing) are left alone. The daemon's
 * own work (draining the rings, merging) happens in either kind of slice
 * and is not the program's time; its calibration events (the check while
 * running) come and go and are not switched.
 *
 * Output: one line per pair and worker on stderr ("# pair K cpu C on-first
 * loss"), then on stdout one line: "pairs=N median=M lower=L upper=U mean=A
 * events=E" (loss in percent; L..U the 95% distribution-free interval of
 * the median). Every event is switched back on before exit (SIGINT and
 * SIGTERM are ignored while switching; only SIGKILL can leave a daemon
 * with its events off, recording nothing: bench/budget.sh stops the
 * daemon after each round anyway). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "throughput_loop.h"

#define CHECK_EVERY 1024u
#define MAX_EVENTS 1024
#define MAX_SLICES 4096
#define MAX_CPUS 256

struct slice_counts {
	uint64_t iterations[MAX_SLICES];
	uint64_t cpu_ns[MAX_SLICES];
};

static int events[MAX_EVENTS];
static int n_events;

static double now_s(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t thread_cpu_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void switch_events(int on) {
	for (int i = 0; i < n_events; ++i)
		ioctl(events[i], on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
}

static uint64_t event_count(int fd) {
	uint64_t buf[8] = {0};
	return read(fd, buf, sizeof buf) >= (ssize_t)sizeof(uint64_t) ? buf[0] : 0;
}

/* Copies of the daemon's perf events; keeps those whose count advances over
 * `settle` seconds (the sampling clocks). Returns how many, or -1. */
static int take_sampling_events(pid_t daemon, double settle) {
	int pidfd = (int)syscall(SYS_pidfd_open, daemon, 0);
	if (pidfd < 0) {
		fprintf(stderr, "budget_paired: pidfd_open(%d): %s; is the daemon running?\n", (int)daemon, strerror(errno));
		return -1;
	}
	char dir[64], link[256], path[320];
	snprintf(dir, sizeof dir, "/proc/%d/fd", (int)daemon);
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "budget_paired: %s: %s\n", dir, strerror(errno));
		close(pidfd);
		return -1;
	}
	int candidates[MAX_EVENTS], n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < MAX_EVENTS) {
		if (e->d_name[0] == '.') continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		ssize_t len = readlink(path, link, sizeof link - 1);
		if (len <= 0) continue;
		link[len] = '\0';
		if (strcmp(link, "anon_inode:[perf_event]") != 0) continue;
		int fd = (int)syscall(SYS_pidfd_getfd, pidfd, atoi(e->d_name), 0);
		if (fd >= 0) candidates[n++] = fd;
	}
	closedir(d);
	close(pidfd);
	uint64_t before[MAX_EVENTS];
	for (int i = 0; i < n; ++i) before[i] = event_count(candidates[i]);
	struct timespec pause = {(time_t)settle, (long)((settle - (double)(time_t)settle) * 1e9)};
	nanosleep(&pause, NULL);
	for (int i = 0; i < n; ++i) {
		if (event_count(candidates[i]) > before[i]) events[n_events++] = candidates[i];
		else close(candidates[i]);
	}
	return n_events;
}

/* One worker: counts iterations and its own CPU time per slice of the
 * shared clock, until `slices` have passed. */
static void run_worker(int cpu, double t0, double slice_s, int slices, struct slice_counts *out) {
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	sched_setaffinity(0, sizeof one, &one);
	uint64_t *table = malloc(THROUGHPUT_TABLE_BYTES);
	if (!table) _exit(1);
	for (size_t i = 0; i < THROUGHPUT_TABLE_SLOTS; ++i) table[i] = throughput_mix(i + (uint64_t)cpu * 7919 + 1);
	uint64_t acc = (uint64_t)cpu + 1, h = acc, iters = 0;
	while (now_s() < t0) {}
	int current = 0;
	uint64_t cpu_at_start = thread_cpu_ns();
	for (;;) {
		throughput_steps(table, &h, &acc, iters, CHECK_EVERY);
		iters += CHECK_EVERY;
		int at = (int)((now_s() - t0) / slice_s);
		if (at == current) continue;
		uint64_t cpu_now = thread_cpu_ns();
		out->iterations[current] = iters;
		out->cpu_ns[current] = cpu_now - cpu_at_start;
		iters = 0;
		cpu_at_start = cpu_now;
		current = at;
		if (current >= slices) break;
	}
	if (acc == 42 && table[0] == 42) fputc('\0', stderr);
	_exit(0);
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The 95% distribution-free interval of the median of sorted v[0..n):
 * order statistics r and n-1-r with P(Binomial(n, 1/2) <= r) <= 2.5%. */
static void median_interval(const double *v, int n, double *lower, double *upper) {
	double cdf = 0;
	int r = -1;
	for (int k = 0; k < n; ++k) {
		double pmf = exp(lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0) - n * log(2.0));
		if (cdf + pmf > 0.025) break;
		cdf += pmf;
		r = k;
	}
	if (r < 0) r = 0;
	*lower = v[r];
	*upper = v[n - 1 - r];
}

int main(int argc, char **argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: %s DAEMON_PID SECONDS SLICE_MS\n", argv[0]);
		return 2;
	}
	pid_t daemon = (pid_t)atoi(argv[1]);
	double seconds = strtod(argv[2], NULL), slice_s = strtod(argv[3], NULL) / 1000;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int slices = (int)(seconds / slice_s) / 2 * 2;
	if (daemon <= 0 || slice_s <= 0 || slices < 2 || slices > MAX_SLICES || cpus < 1 || cpus > MAX_CPUS) {
		fprintf(stderr, "%s: bad DAEMON_PID, SECONDS or SLICE_MS (at most %d slices)\n", argv[0], MAX_SLICES);
		return 2;
	}
	/* The workers must be running while the events are told apart by their
	 * counts, so start them first, on a clock that begins after the sort. */
	struct slice_counts *counts = mmap(NULL, sizeof *counts * (size_t)cpus, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (counts == MAP_FAILED) {
		perror("budget_paired: mmap");
		return 1;
	}
	const double settle = 0.3;
	double t0 = now_s() + settle + 0.2;
	pid_t parent = getpid(), pids[MAX_CPUS];
	for (long c = 0; c < cpus; ++c) {
		pids[c] = fork();
		if (pids[c] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent) _exit(1);
			run_worker((int)c, t0, slice_s, slices, &counts[c]);
		}
	}
	/* The workers spin until t0; the daemon's clocks advance meanwhile. */
	if (take_sampling_events(daemon, settle) <= 0) {
		fprintf(stderr, "budget_paired: the daemon (pid %d) has no perf event that counts; is it sampling?\n", (int)daemon);
		for (long c = 0; c < cpus; ++c) kill(pids[c], SIGKILL);
		return 1;
	}
	signal(SIGINT, SIG_IGN);  /* the events go back on below, whatever happens to the workers */
	signal(SIGTERM, SIG_IGN);
	srand48((long)getpid());
	int *on = calloc((size_t)slices, sizeof(int));
	for (int k = 0; k < slices; k += 2) {
		on[k] = drand48() < 0.5;
		on[k + 1] = !on[k];
	}
	for (int k = 0; k < slices; ++k) {
		double at = t0 + k * slice_s, wait = at - now_s();
		if (wait > 0) {
			struct timespec pause = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
			nanosleep(&pause, NULL);
		}
		switch_events(on[k]);
	}
	for (long c = 0; c < cpus; ++c) waitpid(pids[c], NULL, 0);
	switch_events(1);

	/* The first pair warms the caches and the switch-over; it is dropped. */
	double *loss = calloc((size_t)(slices / 2) * (size_t)cpus, sizeof(double)), sum = 0;
	int n = 0;
	for (int k = 2; k < slices; k += 2)
		for (long c = 0; c < cpus; ++c) {
			int a = k, b = k + 1;
			if (!on[a]) a = k + 1, b = k;
			if (!counts[c].cpu_ns[a] || !counts[c].cpu_ns[b] || !counts[c].iterations[b]) continue;
			double rate_on = (double)counts[c].iterations[a] / (double)counts[c].cpu_ns[a];
			double rate_off = (double)counts[c].iterations[b] / (double)counts[c].cpu_ns[b];
			loss[n] = 100 * (1 - rate_on / rate_off);
			fprintf(stderr, "# pair %d cpu %ld %s %.3f\n", k / 2, c, on[k] ? "on-first" : "off-first", loss[n]);
			sum += loss[n++];
		}
	if (n < 6) {
		fprintf(stderr, "budget_paired: only %d pairs measured; run longer\n", n);
		return 1;
	}
	qsort(loss, (size_t)n, sizeof *loss, cmp_double);
	double lower, upper, median = n % 2 ? loss[n / 2] : (loss[n / 2 - 1] + loss[n / 2]) / 2;
	median_interval(loss, n, &lower, &upper);
	printf("pairs=%d median=%.3f lower=%.3f upper=%.3f mean=%.3f events=%d\n", n, median, lower, upper, sum / n, n_events);
	return 0;
}
