// Streaming: y = a*x + y over two large vectors, several passes (BLAS's daxpy).
#include <stdio.h>
#include <stdlib.h>

static void daxpy(size_t n, double a, const double *x, double *y)
{
	for (size_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoull(argv[1], 0, 10) : 1 << 20;
	int passes = argc > 2 ? atoi(argv[2]) : 4;
	double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
	if (!x || !y)
		return 1;
	for (size_t i = 0; i < n; i++) {
		x[i] = (double)i / (double)n;
		y[i] = 1.0;
	}
	for (int p = 0; p < passes; p++)
		daxpy(n, 0.5, x, y);
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += y[i];
	printf("stream: n=%zu sum=%.3f\n", n, sum);
	free(x);
	free(y);
	return 0;
}
