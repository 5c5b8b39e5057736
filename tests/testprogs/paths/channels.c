/* channels: a poller that serves six input channels in turn (issue 31's
 * three-path loop). Four channels carry sensor samples, folded into a
 * running digest (path A: a dependent chain of multiply/xor/shift steps,
 * 4 of 6 iterations); one carries device ids, looked up in a large
 * registry (path B, 1 of 6: a recently seen device is in a small hot part
 * of it, one lookup in four is a device anywhere in the 128 MB registry and
 * misses every cache); one is a heartbeat (path C, trivial).
 *
 *   channels [ROUNDS] [SEED]
 *
 * Built with -DWITHOUT_DIGEST, -DWITHOUT_LOOKUP or -DWITHOUT_HEARTBEAT
 * (any of them together), a channel's work is left out and its turn does
 * nothing: bench/paths.sh times these builds against the whole program to
 * find what each path costs (ablation). Built with -DFENCE_TURNS, each turn
 * ends with an lfence: the turns no longer overlap in the core
 * (bench/paths.sh ABLATION_FENCE=1). Built with -DEXTRA_DIGEST,
 * -DEXTRA_LOOKUP or -DEXTRA_HEARTBEAT, a round has one more channel of that
 * kind (seven turns): what one more occurrence of a path costs in the
 * program's own mix (the third ablation design). Prints a checksum and the
 * time the poll loop took. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef EXTRA_DIGEST
enum { DIGEST_CHANNELS = 5 };
#else
enum { DIGEST_CHANNELS = 4 };
#endif
#ifdef EXTRA_LOOKUP
enum { LOOKUP_CHANNELS = 2 };
#else
enum { LOOKUP_CHANNELS = 1 };
#endif
#ifdef EXTRA_HEARTBEAT
enum { HEARTBEAT_CHANNELS = 2 };
#else
enum { HEARTBEAT_CHANNELS = 1 };
#endif
enum { CHANNELS = DIGEST_CHANNELS + LOOKUP_CHANNELS + HEARTBEAT_CHANNELS };
enum { REGISTRY_BITS = 24, HOT_DEVICES = 64 };

struct poller {
	uint64_t digest;
	uint64_t seen;      /* registry flags summed over lookups */
	uint64_t lookups;
	uint64_t heartbeats;
	uint64_t random;    /* which far device a lookup asks for */
	uint64_t *registry; /* 2^REGISTRY_BITS devices */
};

static double seconds_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One round of the digest: a 64-bit finalizer step (murmur3's fmix). */
static inline uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 29;
	h *= 0xc4ceb9fe1a85ec53ULL;
	return h ^ (h >> 32);
}

/* A sample is folded word by word; each word's round waits for the last. */
static inline void fold_sample(struct poller *p, uint64_t sample)
{
	p->digest = mix(p->digest ^ sample);
	p->digest = mix(p->digest ^ (sample >> 16));
	p->digest = mix(p->digest ^ (sample >> 32));
}

/* A device id: three in four are recent devices (the hot part of the
 * registry), the fourth any device. No branch: the choice is a mask. */
static inline void look_up_device(struct poller *p)
{
	p->random = p->random * 6364136223846793005ULL + 1442695040888963407ULL;
	uint64_t far = (p->random >> 24) & ((1ULL << REGISTRY_BITS) - 1);
	uint64_t near = p->lookups % HOT_DEVICES;
	uint64_t is_far = -(uint64_t)((p->lookups & 3) == 0);
	p->seen += p->registry[(far & is_far) | (near & ~is_far)];
	p->lookups++;
}

__attribute__((noinline)) static void poll(struct poller *p, long rounds)
{
	for (long turn = 0; turn < rounds * CHANNELS; turn++) {
		unsigned channel = (unsigned)(turn % CHANNELS);
		if (channel < DIGEST_CHANNELS) {
#ifndef WITHOUT_DIGEST
			fold_sample(p, (uint64_t)turn * 0x9E3779B97F4A7C15ULL);
#endif
		} else if (channel < DIGEST_CHANNELS + LOOKUP_CHANNELS) {
#ifndef WITHOUT_LOOKUP
			look_up_device(p);
#endif
		} else {
#ifndef WITHOUT_HEARTBEAT
			p->heartbeats++;
#endif
		}
#ifdef FENCE_TURNS
		/* Each turn waits for the last to finish: no overlap between turns. */
		__asm__ volatile("lfence" ::: "memory");
#else
		__asm__ volatile("" ::: "memory"); /* each turn is one pass of the loop, as in every build */
#endif
	}
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 2000000;
	unsigned long seed = argc > 2 ? strtoul(argv[2], 0, 10) : 1;
	if (rounds <= 0) {
		fprintf(stderr, "usage: channels [ROUNDS>0] [SEED]\n");
		return 2;
	}
	struct poller p = {.digest = seed, .random = seed | 1};
	p.registry = calloc((size_t)1 << REGISTRY_BITS, sizeof *p.registry);
	if (!p.registry) {
		fprintf(stderr, "channels: out of memory for the registry\n");
		return 1;
	}
	for (uint64_t d = 0; d < (1ULL << REGISTRY_BITS); d += 512)
		p.registry[d] = d; /* every page written: no first-touch faults in the loop */
	double started = seconds_now();
	poll(&p, rounds);
	double elapsed = seconds_now() - started;
	printf("channels: %ld rounds, digest %016llx, seen %llu, heartbeats %llu, loop %.3f s, %.3f ns per turn\n", rounds,
	       (unsigned long long)p.digest, (unsigned long long)p.seen, (unsigned long long)p.heartbeats, elapsed,
	       elapsed * 1e9 / (double)(rounds * CHANNELS));
	free(p.registry);
	return 0;
}
