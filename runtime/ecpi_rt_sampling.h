/* The sampling core every sampled feature of the runtime shares (memory
 * references now; path bursts of issue 19 later): time sampling in ON
 * windows of `window` events separated by OFF gaps of random length.
 *
 * MemSpy 4.1: outside a window an event costs one decrement and a branch;
 * the event that brings the countdown to zero takes the slow path, which
 * begins a window, records, and re-arms the countdown (to 1 inside a window,
 * so every ON event takes the slow path, to gap + 1 at the window's end).
 * MemSpy 7.2: gaps are random (uniform within +-off_mean/4 of off_mean,
 * see ECPI_RT_GAP_JITTER) so windows cannot lock onto a periodic phase of
 * the program.
 *
 * Plain C, header-only, no libc calls: the runtime compiles it into its slow
 * path and the unit tests drive it directly. */
#ifndef ECPI_RT_SAMPLING_H
#define ECPI_RT_SAMPLING_H

#include <stdint.h>

struct ecpi_rt_sampler {
	int64_t countdown;     /* hot: events until the slow path (the fast path does --countdown) */
	uint64_t window;       /* ON events per window */
	uint64_t off_mean;     /* mean OFF gap; 0: always ON */
	uint64_t on_left;      /* events left in the current window (0: OFF) */
	uint64_t gap;          /* length of the current or last gap */
	uint64_t windows;      /* windows begun */
	uint64_t rng;          /* xorshift64* state, never 0 */
	uint64_t first_window; /* length of a window the sampler starts inside (0: none) */
};

/* The countdown of a sampler that never samples (no ecpi run controls the
 * program): 2^63 - 1 events before the slow path runs again. */
#define ECPI_RT_COUNTDOWN_NEVER INT64_MAX

static inline uint64_t ecpi_rt_rng_next(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* Gaps vary uniformly by +-off_mean/ECPI_RT_GAP_JITTER around their mean.
 * MemSpy 7.2 asks for random lengths "around a chosen mean, with a
 * specified variance" so windows cannot lock onto a periodic phase; MemSpy
 * itself spaced samples evenly. The variance is the price: the number of
 * windows that fall in a phase of the program varies with it, and with it
 * the estimate. Gaps uniform on [1, 2*off_mean - 1] (a spread 4x wider)
 * gave 3-4 points of L1d miss-rate error at 1/10 on two bundled programs
 * whose phases miss differently (Bloom filter inserts then queries, naive
 * then blocked transpose; about 30 windows); +-off_mean/4 gave about 1
 * (bench/cachesim.sh, docs/CACHESIM.md). A period that matches the mean
 * cycle still drifts through the windows within about 60 cycles. */
#define ECPI_RT_GAP_JITTER 4

/* A gap length: uniform on [off_mean - j, off_mean + j], j = off_mean / ECPI_RT_GAP_JITTER. */
static inline uint64_t ecpi_rt_draw_gap(struct ecpi_rt_sampler *s)
{
	uint64_t j = s->off_mean / ECPI_RT_GAP_JITTER;
	if (j == 0)
		return s->off_mean;
	return s->off_mean - j + ecpi_rt_rng_next(&s->rng) % (2 * j + 1);
}

/* Starts a sampler at a random phase of the ON/OFF cycle drawn from the
 * cycle's stationary distribution, so that the first events of a thread are
 * sampled as often as the rest (every event ON with probability
 * window / (window + off_mean)): inside a window with that probability,
 * with a uniform share of it left; else inside a gap, at a uniform point
 * of a length-biased gap (a longer gap is more likely to hold the start).
 * (A first gap uniform on [0, 2*off_mean - 1] sampled the
 * first 2*off_mean events at about half the rate of the rest, so a run's
 * beginning, often its initialization, weighed half its share in the
 * estimate.) ON at once when off_mean is 0. */
static inline void ecpi_rt_sampler_init(struct ecpi_rt_sampler *s, uint64_t window, uint64_t off_mean, uint64_t seed)
{
	s->window = window ? window : 1;
	s->off_mean = off_mean;
	s->on_left = 0;
	s->windows = 0;
	s->first_window = 0;
	s->rng = seed ? seed : 0x9E3779B97F4A7C15ULL;
	s->gap = 0;
	if (off_mean && ecpi_rt_rng_next(&s->rng) % (s->window + off_mean) >= s->window) {
		/* Inside a gap: a length-biased gap (drawn, kept with probability
		 * length / longest), then a uniform point in it. */
		uint64_t longest = off_mean + off_mean / ECPI_RT_GAP_JITTER, g;
		do
			g = ecpi_rt_draw_gap(s);
		while (ecpi_rt_rng_next(&s->rng) % longest >= g);
		s->gap = 1 + ecpi_rt_rng_next(&s->rng) % g;
	} else if (off_mean) {
		s->first_window = 1 + ecpi_rt_rng_next(&s->rng) % s->window;
	}
	s->countdown = (int64_t)s->gap + 1;
}

/* The slow path for one event (the one that brought the countdown to 0).
 * Returns 1 when this event begins a window (then the caller announces the
 * window, with s->gap events skipped before it). The event itself is always
 * ON: the caller records it after this returns. */
static inline int ecpi_rt_sampler_step(struct ecpi_rt_sampler *s)
{
	int begins = 0;
	if (s->on_left == 0) {
		s->on_left = !s->off_mean ? UINT64_MAX : s->first_window ? s->first_window : s->window;
		s->first_window = 0;
		s->windows++;
		begins = 1;
	}
	if (--s->on_left == 0) {
		s->gap = ecpi_rt_draw_gap(s);
		s->countdown = (int64_t)s->gap + 1;
	} else {
		s->countdown = 1;
	}
	return begins;
}

/* Events skipped in the current gap so far (0 inside a window). */
static inline uint64_t ecpi_rt_sampler_skipped_now(const struct ecpi_rt_sampler *s)
{
	if (s->on_left != 0)
		return 0;
	return s->gap + 1 - (uint64_t)s->countdown;
}

#endif /* ECPI_RT_SAMPLING_H */
