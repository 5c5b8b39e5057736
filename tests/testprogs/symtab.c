/* A symbol table: names interned in an open-addressing hash table, and
 * requests that resolve eight names each. Workload for the probe's net
 * times (tests/bpf/probe_net.sh): symtab_lookup takes about 100 ns a call
 * and resolve_request, which calls it eight times, about 1 us. Each phase
 * is timed with the program's own clocks (wall and the thread's CPU time),
 * so an unprobed run gives the functions' uninstrumented times.
 * Usage: symtab [ROUNDS]
 *   prints "lookup X ns/call, Y ns/call on-CPU" (main > lookup_phase >
 *   symtab_lookup) and "request X ns/call, Y ns/call on-CPU" (main >
 *   request_phase > resolve_request), and the calls of each. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TABLE_SLOTS 8192 /* a power of two, twice the names */
#define NAMES 4096
#define NAME_LEN 64

struct symtab {
	const char *keys[TABLE_SLOTS];
	uint32_t ids[TABLE_SLOTS];
};

static char names[NAMES][NAME_LEN];
static struct symtab table;

static uint64_t hash_name(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static void symtab_insert(struct symtab *t, const char *name, uint32_t id)
{
	uint64_t i = hash_name(name) & (TABLE_SLOTS - 1);
	while (t->keys[i])
		i = (i + 1) & (TABLE_SLOTS - 1);
	t->keys[i] = name;
	t->ids[i] = id;
}

/* The id of `name`, or UINT32_MAX when it is not interned. */
__attribute__((noinline)) uint32_t symtab_lookup(const struct symtab *t, const char *name)
{
	uint64_t i = hash_name(name) & (TABLE_SLOTS - 1);
	while (t->keys[i]) {
		if (strcmp(t->keys[i], name) == 0)
			return t->ids[i];
		i = (i + 1) & (TABLE_SLOTS - 1);
	}
	return UINT32_MAX;
}

/* A request names eight symbols; its answer combines their ids. */
__attribute__((noinline)) uint64_t resolve_request(const struct symtab *t, const uint32_t *which)
{
	uint64_t answer = 0;
	for (int k = 0; k < 8; k++)
		answer = answer * 31 + symtab_lookup(t, names[which[k]]);
	return answer;
}

struct phase_time {
	double wall_ns, cpu_ns; /* per call */
};

static double clock_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static uint32_t next_random(uint32_t *state)
{
	*state = *state * 1664525u + 1013904223u;
	return *state >> 8;
}

__attribute__((noinline)) uint64_t lookup_phase(long calls, struct phase_time *t)
{
	uint32_t rng = 7;
	uint64_t sum = 0;
	double wall = clock_ns(CLOCK_MONOTONIC), cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	for (long i = 0; i < calls; i++)
		sum += symtab_lookup(&table, names[next_random(&rng) % NAMES]);
	t->wall_ns = (clock_ns(CLOCK_MONOTONIC) - wall) / (double)calls;
	t->cpu_ns = (clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu) / (double)calls;
	return sum;
}

__attribute__((noinline)) uint64_t request_phase(long calls, struct phase_time *t)
{
	uint32_t rng = 11, which[8];
	uint64_t sum = 0;
	double wall = clock_ns(CLOCK_MONOTONIC), cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	for (long i = 0; i < calls; i++) {
		for (int k = 0; k < 8; k++)
			which[k] = next_random(&rng) % NAMES;
		sum += resolve_request(&table, which);
	}
	t->wall_ns = (clock_ns(CLOCK_MONOTONIC) - wall) / (double)calls;
	t->cpu_ns = (clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu) / (double)calls;
	return sum;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 20;
	if (rounds < 1)
		rounds = 1;
	for (uint32_t n = 0; n < NAMES; n++) {
		snprintf(names[n], NAME_LEN, "ledger.region%02u.accounts.receivable.customer%05u.balance", n % 37, n);
		symtab_insert(&table, names[n], n);
	}
	struct phase_time lookup, request;
	long lookups = rounds * 4096, requests = rounds * 512;
	uint64_t sum = lookup_phase(lookups, &lookup);
	sum += request_phase(requests, &request);
	printf("lookup %.1f ns/call, %.1f ns/call on-CPU (%ld calls)\n", lookup.wall_ns, lookup.cpu_ns, lookups);
	printf("request %.1f ns/call, %.1f ns/call on-CPU (%ld calls)\n", request.wall_ns, request.cpu_ns, requests);
	printf("checksum %llu\n", (unsigned long long)sum);
	return 0;
}
