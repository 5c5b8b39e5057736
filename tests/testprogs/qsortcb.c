/* A comparator called from inside libc's qsort, which Debian builds without
 * frame pointers: its call paths are complete only through DWARF CFI.
 * Usage: qsortcb   (sorts 64 numbers, prints nothing) */
#include <stdlib.h>

static int values[64];

__attribute__((noinline)) int qsortcb_compare(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

__attribute__((noinline)) void qsortcb_sort(void)
{
	qsort(values, 64, sizeof(values[0]), qsortcb_compare);
}

int main(void)
{
	for (int i = 0; i < 64; i++)
		values[i] = (i * 37) % 64;
	qsortcb_sort();
	return values[0];
}
