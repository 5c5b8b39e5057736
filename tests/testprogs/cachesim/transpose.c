// A matrix transpose, done naively (column-order writes: a line per
// element) and blocked (tiles that fit the L1), then checked.
#include <stdio.h>
#include <stdlib.h>

static void transpose_naive(size_t n, const double *a, double *t)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++)
			t[j * n + i] = a[i * n + j];
}

static void transpose_blocked(size_t n, const double *a, double *t)
{
	const size_t b = 16;
	for (size_t ii = 0; ii < n; ii += b)
		for (size_t jj = 0; jj < n; jj += b)
			for (size_t i = ii; i < ii + b && i < n; i++)
				for (size_t j = jj; j < jj + b && j < n; j++)
					t[j * n + i] = a[i * n + j];
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoull(argv[1], 0, 10) : 1024;
	double *a = malloc(n * n * sizeof *a), *t1 = malloc(n * n * sizeof *t1), *t2 = malloc(n * n * sizeof *t2);
	if (!a || !t1 || !t2)
		return 1;
	for (size_t i = 0; i < n * n; i++)
		a[i] = (double)i;
	transpose_naive(n, a, t1);
	transpose_blocked(n, a, t2);
	size_t bad = 0;
	for (size_t i = 0; i < n * n; i++)
		bad += t1[i] != t2[i];
	printf("transpose: n=%zu mismatches=%zu\n", n, bad);
	free(a);
	free(t1);
	free(t2);
	return bad != 0;
}
