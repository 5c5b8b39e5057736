/* Functions with known control flow for the CFG tests (tests/unit/calc):
 * a dense switch (a jump table), an interpreter's switch on a loaded byte, a call to abort() (no-return), a tail call,
 * a counted loop, a loop that calls a function now and then (append), a loop that calls a binary search on every
 * iteration (found), the same inside a repetition loop (found_rounds), a string's escapes decoded by a switch inside
 * its scanning loop (unescape) and a loop that never exits. Built with GCC (PIE and
 * non-PIE) and Clang when installed; the tests check the CFG, not the output. */
#include <stdio.h>
#include <stdlib.h>

volatile int sink;

__attribute__((noinline)) int dispatch(int op, int x)
{
	switch (op) {
	case 0: return x + 1;
	case 1: return x * 3;
	case 2: return x - 7;
	case 3: return x ^ 0x55;
	case 4: return x << 2;
	case 5: return x >> 1;
	case 6: return -x;
	case 7: return x * x;
	default: return 0;
	}
}

/* One step of a bytecode interpreter: the case is a byte of the program,
 * loaded just before the table (no register holds it earlier). */
struct insn {
	unsigned char op;
	int arg;
};

__attribute__((noinline)) int step(const struct insn *in, int x)
{
	switch (in->op) {
	case 0: return x + in->arg;
	case 1: return x * in->arg;
	case 2: return x - in->arg;
	case 3: return x ^ in->arg;
	case 4: return x << (in->arg & 7);
	case 5: return x >> (in->arg & 7);
	case 6: return in->arg;
	case 7: return x & in->arg;
	default: return x;
	}
}

__attribute__((noinline)) int checked(int x)
{
	if (x < 0)
		abort();
	return x * 2;
}

__attribute__((noinline)) int leaf(int x)
{
	sink = x;
	return x + 1;
}

__attribute__((noinline)) int tail(int x)
{
	return leaf(x * 5);
}

/* A loop around calls of small functions, the second through a table of
 * them: where an iteration's cycles land between the loop and its callees
 * varies (call regions). */
__attribute__((noinline)) long halve(long x)
{
	sink = (int)x;
	return x / 2;
}

__attribute__((noinline)) long negate(long x)
{
	sink = (int)x;
	return -x;
}

static long (*const steps[2])(long) = {halve, negate};

__attribute__((noinline)) long mixed(int n)
{
	long s = 0;
	for (int i = 0; i < n; i++) {
		s += halve(i);
		s ^= steps[i & 1](s);
	}
	return s;
}

__attribute__((noinline)) long counted(const long *v, int n)
{
	long s = 0;
	for (int i = 0; i < n; i++)
		s += v[i];
	return s;
}

/* An array that doubles when full: append's loop calls grow() once per
 * doubling, seldom next to its iterations. */
struct vec {
	long *items;
	long len, cap;
};

__attribute__((noinline)) void grow(struct vec *v)
{
	v->cap = v->cap ? 2 * v->cap : 16;
	v->items = realloc(v->items, v->cap * sizeof *v->items);
	if (!v->items)
		abort();
}

__attribute__((noinline)) long append(struct vec *v, const long *src, long n)
{
	for (long i = 0; i < n; i++) {
		if (v->len == v->cap)
			grow(v);
		v->items[v->len++] = src[i];
	}
	return v->len;
}

/* A binary search over a sorted table, and a loop looking each key up in
 * it. GCC sees that find() never writes r8-r11 (-fipa-ra) and keeps found's
 * pointer into the keys in one of them across the call. */
static __attribute__((noinline)) int find(const unsigned *sorted, int n, unsigned key)
{
	int lo = 0, hi = n - 1;
	while (lo <= hi) {
		int mid = (lo + hi) >> 1;
		if (sorted[mid] < key)
			lo = mid + 1;
		else if (sorted[mid] > key)
			hi = mid - 1;
		else
			return mid;
	}
	return -1;
}

__attribute__((noinline)) long found(const unsigned *keys, int nkeys, const unsigned *sorted, int n)
{
	long hits = 0;
	for (int k = 0; k < nkeys; k++)
		hits += find(sorted, n, keys[k]) >= 0;
	return hits;
}

/* The lookups repeated (a benchmark's repetition loop around them). */
__attribute__((noinline)) long found_rounds(const unsigned *keys, int nkeys, const unsigned *sorted, int n, int rounds)
{
	long hits = 0;
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < nkeys; k++)
			hits += find(sorted, n, keys[k]) >= 0;
	return hits;
}

/* The set bits of an array of words: per word, the lowest set bit cleared
 * until none is left; the count runs on across the words. */
__attribute__((noinline)) int set_bits(const unsigned long *words, int n)
{
	int total = 0;
	for (int i = 0; i < n; i++) {
		unsigned long w = words[i];
		while (w) {
			w &= w - 1;
			total++;
		}
	}
	return total;
}

/* A string's escapes decoded in place, as a JSON or C lexer does: the
 * switch sits in the scanning loop, so the compiler loads the table's
 * address once before the loop, far from the jump. */
__attribute__((noinline)) size_t unescape(char *s, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c != '\\' || i + 1 == n) {
			s[k++] = c;
			continue;
		}
		switch (s[++i]) {
		case 'n': s[k++] = '\n'; break;
		case 't': s[k++] = '\t'; break;
		case 'r': s[k++] = '\r'; break;
		case 'b': s[k++] = '\b'; break;
		case 'f': s[k++] = '\f'; break;
		case '0': s[k++] = '\0'; break;
		case '"': s[k++] = '"'; break;
		case '/': s[k++] = '/'; break;
		case '\\': s[k++] = '\\'; break;
		default: s[k++] = '?'; s[k++] = s[i]; break;
		}
	}
	return k;
}

__attribute__((noinline, noreturn)) void forever(void)
{
	for (;;)
		sink++;
}

int main(int argc, char **argv)
{
	long v[4] = {1, 2, 3, 4};
	unsigned keys[3] = {2, 5, 8}, table[4] = {1, 2, 3, 8};
	struct vec grown = {0};
	if (argc > 5)
		forever();
	printf("%d %d %d %ld %ld %ld %ld %d %ld\n", dispatch(argc, 3), checked(argc), tail(argc), counted(v, 4),
	       append(&grown, v, 4), found(keys, 3, table, 4), found_rounds(keys, 3, table, 4, argc),
	       set_bits((const unsigned long *)v, 4), mixed(argc));
	free(grown.items);
	return (int)unescape(argv[0], (size_t)argc) & 1;
}
