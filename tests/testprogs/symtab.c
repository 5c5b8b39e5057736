/* A symbol table: names interned in an open-addressing hash table, and
 * requests that resolve eight names each. Workload for the probe's net
 * times (tests/bpf/probe_net.sh): symtab_lookup takes about 100 ns a call
 * and resolve_request, which calls it eight times, about 1 us. Each phase
 * is timed with the program's own clock, so an unprobed run gives the
 * functions' uninstrumented times.
 * Usage: symtab [ROUNDS]
 *   prints "lookup X ns/call" (main > lookup_phase > symtab_lookup) and
 *   "request X ns/call" (main > request_phase > resolve_request), and the
 *   calls of each. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TABLE_SLOTS 8192 /* a power of two, twice the names */
#define NAMES 4096
#define NAME_LEN 48

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

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static uint32_t next_random(uint32_t *state)
{
	*state = *state * 1664525u + 1013904223u;
	return *state >> 8;
}

__attribute__((noinline)) uint64_t lookup_phase(long calls, double *ns_per_call)
{
	uint32_t rng = 7;
	uint64_t sum = 0;
	double start = now_ns();
	for (long i = 0; i < calls; i++)
		sum += symtab_lookup(&table, names[next_random(&rng) % NAMES]);
	*ns_per_call = (now_ns() - start) / (double)calls;
	return sum;
}

__attribute__((noinline)) uint64_t request_phase(long calls, double *ns_per_call)
{
	uint32_t rng = 11, which[8];
	uint64_t sum = 0;
	double start = now_ns();
	for (long i = 0; i < calls; i++) {
		for (int k = 0; k < 8; k++)
			which[k] = next_random(&rng) % NAMES;
		sum += resolve_request(&table, which);
	}
	*ns_per_call = (now_ns() - start) / (double)calls;
	return sum;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 20;
	if (rounds < 1)
		rounds = 1;
	for (uint32_t n = 0; n < NAMES; n++) {
		snprintf(names[n], NAME_LEN, "region%02u.acct%05u", n % 37, n);
		symtab_insert(&table, names[n], n);
	}
	double lookup_ns, request_ns;
	long lookups = rounds * 4096, requests = rounds * 512;
	uint64_t sum = lookup_phase(lookups, &lookup_ns);
	sum += request_phase(requests, &request_ns);
	printf("lookup %.1f ns/call (%ld calls)\n", lookup_ns, lookups);
	printf("request %.1f ns/call (%ld calls)\n", request_ns, requests);
	printf("checksum %llu\n", (unsigned long long)sum);
	return 0;
}
