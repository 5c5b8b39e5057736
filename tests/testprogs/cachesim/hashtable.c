// A chained hash table: inserts, then lookups in a scattered order (one
// malloc per entry, so entries of one bucket lie anywhere in the heap).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
struct entry { uint64_t key; uint64_t value; struct entry *next; };
struct table { struct entry **buckets; size_t nbuckets; size_t count; };
static uint64_t hash64(uint64_t x) { x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; return x; }
static void put(struct table *t, uint64_t key, uint64_t value) {
  size_t b = hash64(key) & (t->nbuckets - 1);
  for (struct entry *e = t->buckets[b]; e; e = e->next) if (e->key == key) { e->value = value; return; }
  struct entry *e = malloc(sizeof *e); e->key = key; e->value = value; e->next = t->buckets[b]; t->buckets[b] = e; t->count++;
}
static uint64_t get(const struct table *t, uint64_t key) {
  size_t b = hash64(key) & (t->nbuckets - 1);
  for (const struct entry *e = t->buckets[b]; e; e = e->next) if (e->key == key) return e->value;
  return 0;
}
int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoull(argv[1], 0, 10) : 200000;
  struct table t = { calloc(1 << 16, sizeof(struct entry*)), 1 << 16, 0 };
  for (size_t i = 0; i < n; i++) put(&t, i * 7919, i);
  uint64_t sum = 0;
  for (int r = 0; r < 5; r++) for (size_t i = 0; i < n; i++) sum += get(&t, (i * 104729) % n * 7919);
  printf("sum %llu count %zu\n", (unsigned long long)sum, t.count);
  return 0;
}
