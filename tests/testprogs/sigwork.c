/* A program whose signal handler does real work, the way a periodic
 * checkpoint or statistics dump is often written: a SIGALRM interval timer
 * interrupts the main computation, and the handler checksums the state it
 * left (tests/bpf/record_signal.sh). Built -O2 without frame pointers, so
 * only CFI, through the kernel's signal frame (__restore_rt), joins the
 * handler's samples to the interrupted code and on to main:
 *   _start -> main -> sig_compute -> sig_mix (interrupted)
 *     -> __restore_rt -> sig_on_alarm -> sig_checksum
 * Usage: sigwork SECONDS */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#define STATE_WORDS (1 << 16)

static uint64_t state[STATE_WORDS];
static volatile uint64_t checksum;
static volatile sig_atomic_t done;

__attribute__((noinline)) uint64_t sig_checksum(const uint64_t *words, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (int round = 0; round < 32; round++)
		for (size_t i = 0; i < n; i++)
			h = (h ^ words[i]) * 0x100000001b3ull;
	return h;
}

/* The checkpoint: a checksum of the state, as of this tick. */
static void sig_on_alarm(int sig)
{
	(void)sig;
	checksum = sig_checksum(state, STATE_WORDS);
}

__attribute__((noinline)) void sig_mix(uint64_t *words, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		words[i] ^= seed >> 17;
	}
}

__attribute__((noinline)) void sig_compute(double seconds)
{
	struct timespec start, now;
	uint64_t seed = 1;

	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		sig_mix(state, STATE_WORDS, seed++);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 2.0;
	struct sigaction sa;
	struct itimerval every = {{0, 20000}, {0, 20000}}; /* 20 ms */
	struct itimerval off = {{0, 0}, {0, 0}};

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = sig_on_alarm;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL) != 0 || setitimer(ITIMER_REAL, &every, NULL) != 0)
		return 1;
	sig_compute(seconds);
	setitimer(ITIMER_REAL, &off, NULL);
	return checksum == 42; /* keeps the checksum live */
}
