/* A word-frequency counter, the kind of code profile-guided optimization is
 * for: a hot loop that classifies characters, hashes words and probes a hash
 * table through small helpers the compiler inlines; a rare path that grows
 * the table; a cold report at the end.
 * Usage: wordfreq [ROUNDS]   prints the distinct words and a checksum. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct slot {
	uint64_t hash;
	uint32_t count;
	uint32_t length;
};

struct table {
	struct slot *slots;
	size_t size, used;
};

static uint64_t rng_state = 88172645463325252ull;

static inline uint64_t next_random(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* A text of `words` words from a skewed vocabulary (a few words are most of
 * the text, as in prose), separated by blanks and some punctuation. */
static char *make_text(size_t words, size_t *length)
{
	enum { kVocabulary = 4096 };
	static char vocabulary[kVocabulary][12];
	for (int w = 0; w < kVocabulary; w++) {
		int len = 2 + (int)(next_random() % 9);
		for (int i = 0; i < len; i++)
			vocabulary[w][i] = (char)('a' + next_random() % 26);
		vocabulary[w][len] = '\0';
	}
	char *text = malloc(words * 13 + 1);
	if (!text) {
		perror("malloc");
		exit(1);
	}
	size_t at = 0;
	for (size_t i = 0; i < words; i++) {
		uint64_t r = next_random();
		size_t w = (size_t)((r % kVocabulary) * ((r >> 32) % kVocabulary) / kVocabulary);
		size_t len = strlen(vocabulary[w]);
		memcpy(text + at, vocabulary[w], len);
		at += len;
		text[at++] = (r >> 20) % 16 == 0 ? ',' : ' ';
	}
	text[at] = '\0';
	*length = at;
	return text;
}

static inline int is_word_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '\'';
}

static inline uint64_t hash_step(uint64_t h, unsigned char c)
{
	return (h ^ (uint64_t)(c | 0x20)) * 0x100000001b3ull;
}

__attribute__((noinline)) static void grow(struct table *t)
{
	struct table bigger = {calloc(t->size * 2, sizeof(struct slot)), t->size * 2, 0};
	if (!bigger.slots) {
		perror("calloc");
		exit(1);
	}
	for (size_t i = 0; i < t->size; i++) {
		if (!t->slots[i].count)
			continue;
		size_t j = t->slots[i].hash & (bigger.size - 1);
		while (bigger.slots[j].count)
			j = (j + 1) & (bigger.size - 1);
		bigger.slots[j] = t->slots[i];
		bigger.used++;
	}
	free(t->slots);
	*t = bigger;
}

static inline void add_word(struct table *t, uint64_t hash, uint32_t length)
{
	if (2 * (t->used + 1) > t->size)
		grow(t);
	size_t j = hash & (t->size - 1);
	while (t->slots[j].count && t->slots[j].hash != hash)
		j = (j + 1) & (t->size - 1);
	if (!t->slots[j].count) {
		t->slots[j].hash = hash;
		t->slots[j].length = length;
		t->used++;
	}
	t->slots[j].count++;
}

__attribute__((noinline)) size_t count_words(struct table *t, const char *text, size_t n)
{
	size_t words = 0;
	uint64_t hash = 0xcbf29ce484222325ull;
	uint32_t length = 0;
	for (size_t i = 0; i <= n; i++) {
		unsigned char c = (unsigned char)text[i];
		if (is_word_char(c)) {
			hash = hash_step(hash, c);
			length++;
			continue;
		}
		if (length) {
			add_word(t, hash, length);
			words++;
			hash = 0xcbf29ce484222325ull;
			length = 0;
		}
	}
	return words;
}

__attribute__((noinline)) static void report(const struct table *t, size_t words)
{
	uint64_t sum = 0;
	uint32_t most = 0;
	for (size_t i = 0; i < t->size; i++) {
		sum += t->slots[i].hash * t->slots[i].count;
		if (t->slots[i].count > most)
			most = t->slots[i].count;
	}
	printf("%zu words, %zu distinct, most frequent %u, checksum %llu\n", words, t->used, most,
	       (unsigned long long)sum);
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 20;
	size_t length = 0;
	char *text = make_text(400000, &length);
	struct table t = {calloc(16, sizeof(struct slot)), 16, 0};
	size_t words = 0;
	for (long r = 0; r < rounds; r++)
		words += count_words(&t, text, length);
	report(&t, words);
	free(text);
	free(t.slots);
	return 0;
}
