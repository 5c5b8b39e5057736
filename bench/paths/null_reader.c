/* null_reader: runs a program built with `ecpi flags paths --inline` under
 * the runtime's protocol as `ecpi paths record` does (the same control
 * region, ring sizes and drain loop as loader/memtrace/memtrace.cpp), but
 * reads the records in one of two cheaper ways, to tell apart what
 * recording costs the program (bench/paths.sh reader, issue 31):
 *
 *   discard  frees the ring's space without reading a record: the
 *            runtime's own work (spans, bursts, copies into the ring) and
 *            nothing of a reader beside it;
 *   touch    reads every record's two words (sums them), then frees the
 *            space: the ring's cache lines go to the other CPU as with
 *            ecpi, without ecpi's decoding.
 *
 *   null_reader MODE WINDOW OFF_MEAN SEED -- PROGRAM [ARGS...]
 *
 * WINDOW and OFF_MEAN as `ecpi paths record --sample 1/N` sets them:
 * 4096 and 4096 x (N - 1). Prints the program's output, then the records
 * read and the seconds the program waited for ring space. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../runtime/ecpi_rt_abi.h"

enum { RINGS = 64, RING_RECORDS = 1 << 18, BUDGET = 1 << 16 };

static struct ecpi_rt_ring *ring_at(char *map, uint32_t i)
{
	return (struct ecpi_rt_ring *)(map + ECPI_RT_RING_OFFSET(i, RING_RECORDS));
}

/* One pass over the claimed rings; returns the records freed. */
static uint64_t drain(char *map, int touch, uint64_t *sum)
{
	struct ecpi_rt_header *h = (struct ecpi_rt_header *)map;
	uint32_t claimed = __atomic_load_n(&h->rings_claimed, __ATOMIC_ACQUIRE);
	uint64_t total = 0;
	for (uint32_t i = 0; i < claimed && i < RINGS; i++) {
		struct ecpi_rt_ring *r = ring_at(map, i);
		uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE), tail = r->tail;
		uint64_t n = head - tail < BUDGET ? head - tail : BUDGET;
		const struct ecpi_rt_record *records = (const struct ecpi_rt_record *)(r + 1);
		for (uint64_t k = 0; touch && k < n; k++) {
			const struct ecpi_rt_record *rec = &records[(tail + k) & (RING_RECORDS - 1)];
			*sum += rec->w0 ^ rec->w1;
		}
		__atomic_store_n(&r->tail, tail + n, __ATOMIC_RELEASE);
		total += n;
	}
	return total;
}

int main(int argc, char **argv)
{
	if (argc < 7 || strcmp(argv[5], "--") != 0 || (strcmp(argv[1], "discard") && strcmp(argv[1], "touch"))) {
		fprintf(stderr, "usage: null_reader discard|touch WINDOW OFF_MEAN SEED -- PROGRAM [ARGS...]\n");
		return 2;
	}
	int touch = strcmp(argv[1], "touch") == 0;
	size_t size = ECPI_RT_RING_OFFSET(RINGS, RING_RECORDS);
	int fd = memfd_create("ecpi-rt-control", 0); /* inherited by the program */
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
		fprintf(stderr, "null_reader: control region: %s\n", strerror(errno));
		return 1;
	}
	char *map = mmap(0, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		fprintf(stderr, "null_reader: mapping the control region: %s\n", strerror(errno));
		return 1;
	}
	struct ecpi_rt_header *h = (struct ecpi_rt_header *)map;
	*h = (struct ecpi_rt_header){.magic = ECPI_RT_MAGIC, .abi_version = ECPI_RT_ABI_VERSION,
	                             .header_size = sizeof *h, .region_size = size,
	                             .features_requested = ECPI_RT_FEATURE_PATHS, .window = strtoull(argv[2], 0, 10),
	                             .off_mean = strtoull(argv[3], 0, 10), .seed = strtoull(argv[4], 0, 10),
	                             .ring_count = RINGS, .ring_records = RING_RECORDS};
	char env[32];
	snprintf(env, sizeof env, "%d", fd);
	setenv(ECPI_RT_CONTROL_ENV, env, 1);
	pid_t pid = fork();
	if (pid == 0) {
		execvp(argv[6], argv + 6);
		fprintf(stderr, "null_reader: running %s: %s\n", argv[6], strerror(errno));
		_exit(127);
	}
	uint64_t records = 0, sum = 0;
	int status = 0, exited = 0;
	for (;;) {
		exited = exited || waitpid(pid, &status, WNOHANG) == pid;
		uint64_t n = drain(map, touch, &sum);
		records += n;
		if (n == 0) {
			if (exited)
				break;
			nanosleep(&(struct timespec){0, 100000}, 0);
		}
	}
	__atomic_store_n(&h->consumer_gone, 1, __ATOMIC_RELEASE);
	printf("null_reader: %s %llu records (sum %llx), the program waited %.3f s for ring space\n", argv[1],
	       (unsigned long long)records, (unsigned long long)sum, (double)h->stall_ns / 1e9);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
