/* Spans: how `ecpi flags paths --inline` times paths (issue 31).
 *
 * A fenced stamp at every block entry (a burst, rt_core.c) serializes the
 * out-of-order core: on this project's Intel host it exposed a cache miss
 * that the plain program overlaps with the loop's other work and hid the
 * overlap of a dependent multiply chain (paths of 38 and 15 ns read as 48
 * and 8). Here every block entry does the same work inside and outside a
 * span: it appends its address to the thread's log and decrements the
 * countdown (rt_paths_inline.c, inlined into the program). Only the two
 * ends of a span, a random number of block entries apart, read the clock,
 * unfenced. The analysis cuts the span's log into paths and fits each
 * path's mean cost over many spans (analyze/paths/span_fit.cpp).
 *
 * Bursts of stamped entries remain, rarer (ECPI_RT_SPANS_PER_BURST_BLOCK):
 * they give each path's time distribution and basetime. */
#include "rt_internal.h"

/* Block entries timed in spans per block entry recorded in bursts: a
 * burst entry costs the program about 120 TSC ticks (a fenced stamp and a
 * record), a span entry nothing beyond the log. The bursts give each
 * path's time distribution, basetime and net variation, whose noise goes
 * with how many occurrences they hold, not with their share of the run:
 * the first ECPI_RT_BURST_BLOCKS_FULL entries of a thread's bursts come at
 * 1 in ECPI_RT_SPANS_PER_BURST_BLOCK + 1 sampled entries, the rest at 1 in
 * ECPI_RT_SPANS_PER_BURST_BLOCK_LATE + 1 (channels at --sample 1/10 and
 * 6,000,000 rounds: 720,897 burst entries, 41 ms of the runtime's 60 ms).
 * A program whose paths change over the run has its early phase weigh
 * more in those figures; the span fit (the paths' times) is not affected. */
#define ECPI_RT_SPANS_PER_BURST_BLOCK 16
#define ECPI_RT_SPANS_PER_BURST_BLOCK_LATE 128
#define ECPI_RT_BURST_BLOCKS_FULL (1u << 17)

/* Parts of the recording cost turned off one at a time, for
 * bench/paths.sh breakdown only (bench/paths/build_runtime.sh passes them;
 * runtime/CMakeLists.txt never does): ECPI_RT_BENCH_NO_BURSTS, no stamped
 * bursts after the thread's first window; ECPI_RT_BENCH_NO_SPAN_RECORDS,
 * spans timed but nothing of them written into the ring. Either loses
 * data that ecpi needs: they only measure what a part costs.
 * ECPI_RT_BENCH_SLOW_TICKS: each run-out of the countdown timed by two
 * fenced clock reads, summed by what it was (a span's end, a span's
 * start, anything else: a burst's entry, a gap's end), printed on stderr
 * at exit (run-outs that took over ECPI_RT_BENCH_LONG_TICKS apart: the thread's
 * first, which claims and prefaults its ring, and interrupts). Each
 * figure includes the two reads' own cost. */
#ifdef ECPI_RT_BENCH_SLOW_TICKS
#include <stdio.h>
#define ECPI_RT_BENCH_LONG_TICKS 20000
enum { SLOW_SPAN_END, SLOW_SPAN_BEGIN, SLOW_OTHER, SLOW_LONG, SLOW_KINDS };
static uint64_t slow_ticks[SLOW_KINDS], slow_calls[SLOW_KINDS];

__attribute__((destructor)) static void print_slow_ticks(void)
{
	static const char *const names[SLOW_KINDS] = {"span end", "span start", "other", "long"};
	for (int k = 0; k < SLOW_KINDS; k++)
		fprintf(stderr, "ecpi_rt slow ticks: %s %lu run-outs %lu ticks\n", names[k], (unsigned long)slow_calls[k],
		        (unsigned long)slow_ticks[k]);
}
#endif

static uint64_t kind(enum ecpi_rt_record_kind k)
{
	return (uint64_t)k << ECPI_RT_KIND_SHIFT;
}

/* The gap before the next span or burst: as many block entries, times the
 * sampler's OFF/ON ratio, as the last one took (jittered as its gaps are). */
static uint64_t gap_after(struct ecpi_rt_thread *t, uint64_t length)
{
	struct ecpi_rt_sampler *s = &t->path_sampler;
	uint64_t mean = s->off_mean / s->window * length;
	uint64_t j = mean / ECPI_RT_GAP_JITTER;
	return j ? mean - j + ecpi_rt_rng_next(&s->rng) % (2 * j + 1) : mean;
}

static void span_begin(struct ecpi_rt_thread *t)
{
	struct ecpi_rt_sampler *s = &t->path_sampler;
	uint64_t length = ECPI_RT_SPAN_MIN + ecpi_rt_rng_next(&s->rng) % (ECPI_RT_SPAN_MAX - ECPI_RT_SPAN_MIN + 1);
	t->span_first = t->log_pos - 1; /* this block, logged before its countdown ran out */
	t->span_open = 1;
	s->countdown = (int64_t)length; /* its start stamp: ecpi_rt_span_slow, last */
}

/* A span's records, written straight into the ring (one copy of the log's
 * entries, not two through the burst stage): SPAN, its entries packed
 * (ecpi_rt_span_pack), SPAN_END. */
static void write_span(struct ecpi_rt_thread *t, uint64_t last, uint64_t blocks, uint64_t end_tsc)
{
	uint64_t context = t->span_first < ECPI_RT_SPAN_CONTEXT ? t->span_first : ECPI_RT_SPAN_CONTEXT;
	uint64_t first = t->span_first - context, entries = last - first + 1;
	uint32_t n = (uint32_t)(2 + (entries + 1) / 2); /* at most */
	if (ecpi_rt_ring_reserve(t, n)) {
		struct ecpi_rt_record *rec = t->records;
		uint64_t at = t->head, mask = t->mask;
		rec[at++ & mask] = (struct ecpi_rt_record){kind(ECPI_RT_REC_SPAN) | context << 16 | blocks, t->span_start_tsc};
		at += ecpi_rt_span_pack(t, (uint32_t)entries, rec, mask, at);
		rec[at & mask] = (struct ecpi_rt_record){kind(ECPI_RT_REC_SPAN_END), end_tsc};
		ecpi_rt_ring_commit(t, (uint32_t)(at + 1 - t->head));
	}
}

/* The span ends at this block's entry (logged at log_pos - 1): its records
 * go to the ring, outside any timed interval, and the next gap begins. */
static void span_end(struct ecpi_rt_thread *t, uint64_t end_tsc)
{
	uint64_t last = t->log_pos - 1, blocks = last - t->span_first;
	t->span_open = 0;
#ifndef ECPI_RT_BENCH_NO_SPAN_RECORDS
	write_span(t, last, blocks, end_tsc);
#else
	(void)end_tsc;
	(void)write_span;
#endif
	t->span_blocks += blocks;
	t->path_sampler.countdown = (int64_t)gap_after(t, blocks) + 1;
}

/* A gap ended on an active thread: a span, or a burst where bursts are
 * behind their share. */
static int wants_span(const struct ecpi_rt_thread *t)
{
	const struct ecpi_rt_sampler *s = &t->path_sampler;
	if (s->off_mean == 0 || s->on_left != 0 || s->first_window != 0)
		return 0; /* always ON (--sample 1/1), or inside a burst */
#ifdef ECPI_RT_BENCH_NO_BURSTS
	return 1;
#endif
	return t->burst_blocks * (t->bursts_late ? ECPI_RT_SPANS_PER_BURST_BLOCK_LATE : ECPI_RT_SPANS_PER_BURST_BLOCK) >=
	       t->span_blocks;
}

/* The thread's bursts hold enough entries: the late share from here on,
 * counted afresh (so that bursts go on at once, spread over the rest of the
 * run, rather than after the spans have caught up with the whole run's
 * share). */
static void count_burst_block(struct ecpi_rt_thread *t)
{
	if (++t->burst_blocks < ECPI_RT_BURST_BLOCKS_FULL || t->bursts_late)
		return;
	t->bursts_late = 1;
	t->burst_blocks = 1;
	t->span_blocks = ECPI_RT_SPANS_PER_BURST_BLOCK_LATE;
}

/* What the countdown's run-out at this block means: a span's end or
 * start, or a burst's entry (or a thread's first event). 1 when a span
 * begins. */
static int decide(struct ecpi_rt_thread *t, uint64_t pc, uint64_t now)
{
	if (t->span_open) {
		span_end(t, now);
		return 0;
	}
	if (t->state == ECPI_RT_THREAD_ACTIVE && !t->in_runtime && (ecpi_rt_features & ECPI_RT_FEATURE_PATHS) &&
	    wants_span(t)) {
		span_begin(t);
		return 1;
	}
	int was_on = t->path_sampler.on_left != 0;
	ecpi_rt_block_slow(pc);
	if (was_on || t->path_sampler.on_left != 0)
		count_burst_block(t);
	return 0;
}

static inline void span_slow(struct ecpi_rt_thread *t, uint64_t pc)
{
	/* First: a span's end, before the runtime's own work. Only a span's end
	 * reads this clock: a burst's entry is stamped (fenced) by
	 * ecpi_rt_block_slow, and a span's start after the re-arm. Read at every
	 * run-out, it cost each burst entry about 18 ns for nothing (the
	 * runtime's calibrated cost of a burst entry, channels, 9 paired runs
	 * under the exclusive lock: 67 ns median before, 49 after). */
	uint64_t now = t->span_open ? ecpi_rt_rdtsc() : 0;
	t->log_pos += t->log_armed; /* the entries logged since the countdown was set */
	int begins = decide(t, pc, now);
	ecpi_rt_log_rearm(t);
	if (begins)
		t->span_start_tsc = ecpi_rt_rdtsc(); /* last: the block's own work follows */
}

void ecpi_rt_span_slow(uint64_t pc)
{
	struct ecpi_rt_thread *t = &ecpi_rt_tls;
#ifdef ECPI_RT_BENCH_SLOW_TICKS
	int k = t->span_open ? SLOW_SPAN_END : SLOW_OTHER;
	uint64_t start = ecpi_rt_rdtsc_fenced();
	span_slow(t, pc);
	uint64_t ticks = ecpi_rt_rdtsc_fenced() - start;
	k = ticks > ECPI_RT_BENCH_LONG_TICKS ? SLOW_LONG : k == SLOW_OTHER && t->span_open ? SLOW_SPAN_BEGIN : k;
	slow_ticks[k] += ticks;
	slow_calls[k]++;
#else
	span_slow(t, pc);
#endif
}
