/* Measures the core's effective clock rate: a chain of dependent register-to-
 * register adds retires one add per cycle on every x86-64 core, so adds per
 * second = cycles per second. (Not `add $imm, reg`: Intel cores since Golden
 * Cove fold chains of immediate adds at rename, several per cycle, which made
 * this read 7 GHz on a 2.3 GHz Xeon.) Prints the median MHz of 7 rounds. Used by bench/accuracy.sh because cpu-clock samples
 * must be turned into cycles and /proc/cpuinfo shows the nominal rate. */
#include <stdio.h>
#include <time.h>

int main(void)
{
	double mhz[7];
	for (int round = 0; round < 7; round++) {
		struct timespec a, b;
		long n = 50000000, x = 0, one = 1;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
		__asm__ volatile("1: add %2, %0\n add %2, %0\n add %2, %0\n add %2, %0\n"
				 " add %2, %0\n add %2, %0\n add %2, %0\n add %2, %0\n"
				 " sub $1, %1\n jnz 1b"
				 : "+r"(x), "+r"(n)
				 : "r"(one));
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
		double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
		mhz[round] = 8 * 50000000.0 / s / 1e6;
	}
	/* the median of 7 rounds */
	for (int i = 0; i < 7; i++)
		for (int j = i + 1; j < 7; j++)
			if (mhz[j] < mhz[i]) {
				double t = mhz[i];
				mhz[i] = mhz[j];
				mhz[j] = t;
			}
	printf("%.0f\n", mhz[3]);
	return 0;
}
