/* A small log-record processor, the kind of code a layout tool is for: most
 * records take the common path (parse, hash into a table, count), a few take
 * rare paths (malformed input, table growth, a summary line every so often),
 * and helper functions that seldom run sit between the hot ones.
 * Usage: records [COUNT]   prints a checksum of what it counted. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	uint64_t key;
	uint64_t count;
	uint64_t bytes;
};

struct table {
	struct entry *slots;
	size_t size, used;
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

__attribute__((noinline)) uint64_t next_random(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Writes one record into buf: "GET /path/NNN 200 SIZE" or, rarely, garbage. */
__attribute__((noinline)) size_t make_record(char *buf, size_t cap)
{
	uint64_t r = next_random();
	if ((r & 1023) == 7)
		return (size_t)snprintf(buf, cap, "%%%%garbage-%llu", (unsigned long long)(r >> 20));
	static const char *verbs[] = {"GET", "GET", "GET", "POST", "GET", "HEAD", "GET", "PUT"};
	return (size_t)snprintf(buf, cap, "%s /item/%llu %d %llu", verbs[r & 7], (unsigned long long)((r >> 8) % 5000),
				(r >> 40) % 50 == 0 ? 404 : 200, (unsigned long long)((r >> 16) % 10000));
}

__attribute__((noinline)) void report_malformed(const char *line, uint64_t *malformed)
{
	++*malformed;
	if (*malformed % 64 == 1)
		fprintf(stderr, "malformed record: %.20s\n", line);
}

__attribute__((noinline)) int parse_record(const char *line, uint64_t *key, int *status, uint64_t *bytes)
{
	const char *p = strchr(line, ' ');
	if (!p || strncmp(p + 1, "/item/", 6) != 0)
		return -1;
	char *end;
	*key = strtoull(p + 7, &end, 10);
	if (*end != ' ')
		return -1;
	*status = (int)strtol(end + 1, &end, 10);
	if (*end != ' ')
		return -1;
	*bytes = strtoull(end + 1, &end, 10);
	return 0;
}

__attribute__((noinline)) uint64_t hash_key(uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	return key;
}

__attribute__((noinline)) void grow(struct table *t)
{
	struct table bigger = {calloc(t->size * 2, sizeof(struct entry)), t->size * 2, 0};
	if (!bigger.slots) {
		perror("calloc");
		exit(1);
	}
	for (size_t i = 0; i < t->size; i++) {
		if (!t->slots[i].count)
			continue;
		size_t j = hash_key(t->slots[i].key) & (bigger.size - 1);
		while (bigger.slots[j].count)
			j = (j + 1) & (bigger.size - 1);
		bigger.slots[j] = t->slots[i];
		bigger.used++;
	}
	free(t->slots);
	*t = bigger;
}

__attribute__((noinline)) void count_record(struct table *t, uint64_t key, uint64_t bytes)
{
	if (2 * (t->used + 1) > t->size)
		grow(t);
	size_t j = hash_key(key) & (t->size - 1);
	while (t->slots[j].count && t->slots[j].key != key)
		j = (j + 1) & (t->size - 1);
	if (!t->slots[j].count) {
		t->slots[j].key = key;
		t->used++;
	}
	t->slots[j].count++;
	t->slots[j].bytes += bytes;
}

__attribute__((noinline)) void print_summary(const struct table *t, uint64_t n)
{
	uint64_t most = 0, key = 0;
	for (size_t i = 0; i < t->size; i++)
		if (t->slots[i].count > most) {
			most = t->slots[i].count;
			key = t->slots[i].key;
		}
	fprintf(stderr, "after %llu records: %zu keys, hottest /item/%llu (%llu)\n", (unsigned long long)n, t->used,
		(unsigned long long)key, (unsigned long long)most);
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
	struct table t = {calloc(16, sizeof(struct entry)), 16, 0};
	uint64_t malformed = 0, errors = 0;
	char line[128];
	for (uint64_t i = 0; i < n; i++) {
		make_record(line, sizeof line);
		uint64_t key, bytes;
		int status;
		if (parse_record(line, &key, &status, &bytes) != 0) {
			report_malformed(line, &malformed);
			continue;
		}
		if (status != 200) {
			errors++;
			continue;
		}
		count_record(&t, key, bytes);
		if ((i + 1) % 2000000 == 0)
			print_summary(&t, i + 1);
	}
	uint64_t sum = 0;
	for (size_t i = 0; i < t.size; i++)
		sum += t.slots[i].count * 31 + t.slots[i].bytes;
	printf("%zu keys, %llu malformed, %llu errors, checksum %llu\n", t.used, (unsigned long long)malformed,
	       (unsigned long long)errors, (unsigned long long)sum);
	return 0;
}
