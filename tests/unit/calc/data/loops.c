/* Loops as real code writes them, for the induction-variable tests
 * (loops_test.cpp). Built as a shared library by GCC and Clang at -O1, -O2
 * and -O3: each compiler and level shapes the same loops differently
 * (down-counting, pointer strides, rotated exit tests, unrolling). */
#include <stddef.h>

struct item {
	long key;
	long value;
};

/* The plain pointer chase: `for (i = 0; i < steps; i++) p = next[p];` */
unsigned chase(const unsigned *next, unsigned p, long steps)
{
	for (long i = 0; i < steps; i++)
		p = next[p];
	return p;
}

long sum_array(const int *a, long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += a[i];
	return s;
}

long sum_keys(const struct item *items, size_t n)
{
	long s = 0;
	for (const struct item *it = items; it != items + n; it++)
		s += it->key;
	return s;
}

/* Counts down in a 32-bit register. */
unsigned checksum(const unsigned char *buf, unsigned len)
{
	unsigned h = 5381;
	while (len--)
		h = h * 33 + *buf++;
	return h;
}

struct node {
	struct node *next;
	long value;
};

/* No induction variable: the loop moves by what it loads. */
long list_sum(const struct node *n)
{
	long s = 0;
	while (n) {
		s += n->value;
		n = n->next;
	}
	return s;
}

/* Nested: the inner loop's counter restarts every outer iteration. */
long matrix_sum(const long *m, long rows, long cols)
{
	long s = 0;
	for (long r = 0; r < rows; r++)
		for (long c = 0; c < cols; c++)
			s += m[r * cols + c];
	return s;
}
