/* Internal to the runtime: per-thread state and the calls between its files. */
#ifndef ECPI_RT_INTERNAL_H
#define ECPI_RT_INTERNAL_H

#include <stdint.h>

#include "ecpi_rt_abi.h"
#include "ecpi_rt_sampling.h"

enum ecpi_rt_thread_state {
	ECPI_RT_THREAD_NEW = 0,    /* no event seen yet */
	ECPI_RT_THREAD_ACTIVE = 1, /* has a ring */
	ECPI_RT_THREAD_OFF = 2,    /* uncontrolled, out of rings, ended, or a fork child */
};

/* Per-thread state. The samplers come first: a fast path touches only one
 * countdown, at a fixed offset from the thread pointer. Memory references
 * and block entries are sampled apart: a program built for both and run
 * for one feature keeps the other's countdown at "never". */
struct ecpi_rt_thread {
	struct ecpi_rt_sampler sampler;      /* memory references (MemSpy windows) */
	struct ecpi_rt_sampler path_sampler; /* block entries (VPP bursts) */
	/* Set sampling: a reference whose bit ((address >> set_shift) & 63) of
	 * set_bitmap is set takes the slow path outside windows too
	 * (header.set_bitmap). Off: 0. */
	uint64_t set_bitmap;
	uint64_t set_shift;
	uint64_t set_base;            /* header.set_bitmap: window 0's filter */
	uint32_t set_rotate_step;     /* header.set_rotate_step */
	uint32_t set_rotate_windows;  /* header.set_rotate_windows (0: no rotation) */
	uint32_t set_rotate_warm;     /* header.set_rotate_warm */
	uint32_t set_hit_mask;        /* header.set_hit_mask (0: every sampled set's reference recorded) */
	uint64_t set_hits;            /* references settled by ecpi_rt_set_hit since the last SET_HITS record */
	uint64_t set_last_line[64];   /* per entry (line & set_hit_mask): last recorded line + 1; 0: none */
	struct ecpi_rt_ring *ring;
	struct ecpi_rt_record *records;
	uint64_t head;        /* records written (mirror of ring->head) */
	uint64_t cached_tail; /* the consumer's tail when last read */
	uint32_t mask;        /* ring_records - 1 */
	uint32_t state;       /* enum ecpi_rt_thread_state */
	uint32_t in_runtime;  /* set while the runtime itself calls into libc */
	uint32_t staged;      /* records in `stage` */
	struct ecpi_rt_record *stage; /* a burst's records before they go to the ring (paths) */
	uint64_t paused_ticks; /* the runtime's own time spent copying stages out (calibration) */
	/* Spans (`ecpi flags paths --inline`, rt_paths_inline.c): every block
	 * entry appends its address to `log`, inside a span or not; a span is
	 * timed by two unfenced clock reads only (rt_spans.c). */
	uint64_t log_pos;         /* block entries logged up to the countdown's last run-out */
	uint64_t log_armed;       /* what the countdown was set to then (the entries logged since, once it runs out) */
	uint64_t span_first;      /* log position of the span's first block (open span) */
	uint64_t span_start_tsc;  /* its start stamp */
	uint64_t span_blocks;     /* block entries timed in spans so far */
	uint64_t burst_blocks;    /* block entries recorded in bursts so far (inline builds) */
	uint32_t span_open;
	uint32_t bursts_late;     /* the thread's bursts hold ECPI_RT_BURST_BLOCKS_FULL entries: the late share */
	uint64_t log[256];        /* ECPI_RT_LOG_ENTRIES */
};

/* The block log of inline builds: a power of two, longer than the longest
 * span (ECPI_RT_SPAN_MAX) plus the blocks before it that a span's records
 * carry for context (ECPI_RT_SPAN_CONTEXT) plus its end block. */
#define ECPI_RT_LOG_ENTRIES 256
/* One counter is both the path countdown and the log's cursor, running
 * down: the entry that finds the countdown at `left` (before its
 * decrement) takes slot ECPI_RT_LOG_SLOT(left). So the entry that runs the
 * countdown out is always in slot 1, and the k-th entry before it in slot
 * 1 + k, as long as the slow path, whenever it sets the countdown anew,
 * moves the last entries to the slots just above the next one's
 * (ecpi_rt_log_rearm). A separate cursor cost every block a second
 * load-increment-store of memory. */
#define ECPI_RT_LOG_SLOT(left) ((uint64_t)(left) % ECPI_RT_LOG_ENTRIES)
#define ECPI_RT_SPAN_MIN 48
#define ECPI_RT_SPAN_MAX 176
#define ECPI_RT_SPAN_CONTEXT 4
_Static_assert(ECPI_RT_SPAN_MAX + ECPI_RT_SPAN_CONTEXT + 1 < ECPI_RT_LOG_ENTRIES, "the log must hold a span and its context");

_Static_assert(ECPI_RT_LOG_ENTRIES == 256, "ecpi_rt_log_step reads a slot as the countdown's low byte");

/* A block entry of an inline build (rt_paths_inline.c, inlined into the
 * program): logs pc and returns the countdown left (0: the slow path's
 * turn). The slot is the countdown's low byte (x86 is little-endian),
 * read by itself, and the decrement is one read-modify-write of memory
 * with the branch on its flags: four instructions and one register after
 * the block's `lea` (t in %rdx, as rt_paths_inline.c has it)
 *     movzbl CD(%rdx),%eax; mov %rdi,LOG(%rdx,%rax,8); addq $-1,CD(%rdx); je cold
 * The byte read is volatile so that the compiler does not load the whole
 * countdown once into a register for both, as it did from plain C (seven
 * instructions, two registers: load, movzbl, store, add, store back).
 * With the state through a register (rt_paths_inline.c), channels' inline
 * build on the AMD EPYC VM took 0.935-0.969x the seven's time idle and
 * 0.95x recorded at 1/10 (docs/PATHS.md, issue 31). */
static inline int64_t ecpi_rt_log_step(struct ecpi_rt_thread *t, uint64_t pc)
{
	t->log[*(volatile const uint8_t *)&t->path_sampler.countdown] = pc;
	return --t->path_sampler.countdown;
}

/* After the countdown ran out (log_pos entries logged, the last in slot 1)
 * and was set anew: the next entry takes its slot, and the entry just
 * logged and those a span begun at the next run-out takes for context move
 * to the slots above it, all read before any is written (a countdown under
 * 5 moves them onto each other). A countdown of 252-255 (mod the log's
 * length) wraps them past slot 0 and its own entries overwrite them: they
 * are needed only when the countdown is under 5. */
static inline void ecpi_rt_log_rearm(struct ecpi_rt_thread *t)
{
	uint64_t left = (uint64_t)t->path_sampler.countdown, kept[ECPI_RT_SPAN_CONTEXT + 1];
	for (uint64_t k = 0; k <= ECPI_RT_SPAN_CONTEXT; k++)
		kept[k] = t->log[1 + k];
	for (uint64_t k = 0; k <= ECPI_RT_SPAN_CONTEXT; k++)
		t->log[ECPI_RT_LOG_SLOT(left + 1 + k)] = kept[k];
	t->log_armed = left;
}

/* The entry at log position i (counted as log_pos counts), when the
 * countdown has just run out at position last (i <= last, last - i under
 * ECPI_RT_LOG_ENTRIES - 1, and no re-arm in between but one that kept it). */
static inline uint64_t ecpi_rt_log_at(const struct ecpi_rt_thread *t, uint64_t last, uint64_t i)
{
	return t->log[ECPI_RT_LOG_SLOT(1 + last - i)];
}

/* Writes the last n block entries of the log (n under
 * ECPI_RT_LOG_ENTRIES; the countdown has just run out, so the last is in
 * slot 1 and the first in slot n) as records from rec[at & mask] on, in as
 * few records as their distances allow: seven to a SPAN_DELTA16 where each
 * is within 32 KiB of the one before, four to a SPAN_DELTA28 within
 * 128 MiB, else two to a SPAN_BLOCK (the first two always). Returns the
 * records written: at most (n + 1) / 2. Entries are addresses under 2^56
 * (user space), so a difference never overflows.
 *
 * Each difference is taken once and tested without a branch: d fits in
 * `bits` signed bits when (d + 2^(bits-1)) >> bits is 0 (modulo 2^64),
 * so a record's test is the OR of its differences so shifted. Testing
 * each difference with two compares and a branch, then taking them all
 * again to write the record, cost 108-129 ns a span of 117 entries on the
 * AMD EPYC VM, about two thirds of what writing a span's records cost a
 * recorded program; this way 74 ns, the same records (docs/PATHS.md,
 * issue 31). */
static inline uint64_t ecpi_rt_span_wide(uint64_t d, unsigned bits)
{
	return (d + (1ull << (bits - 1))) >> bits;
}

static inline uint32_t ecpi_rt_span_pack(const struct ecpi_rt_thread *t, uint32_t n, struct ecpi_rt_record *rec, uint64_t mask,
                                         uint64_t at)
{
	const uint64_t *e = &t->log[n]; /* entry i at e - i: the slots run down */
	const uint64_t k16 = (uint64_t)ECPI_RT_REC_SPAN_DELTA16 << ECPI_RT_KIND_SHIFT;
	const uint64_t k28 = (uint64_t)ECPI_RT_REC_SPAN_DELTA28 << ECPI_RT_KIND_SHIFT;
	const uint64_t kblock = (uint64_t)ECPI_RT_REC_SPAN_BLOCK << ECPI_RT_KIND_SHIFT;
	uint64_t start = at;
	uint32_t i = 0;
	while (i < n) {
		const uint64_t *p = e - i; /* entry i + k at p - k */
		if (i > 0 && i + 4 <= n) {
			uint64_t d0 = p[0] - p[1], d1 = p[-1] - p[0], d2 = p[-2] - p[-1], d3 = p[-3] - p[-2];
			if (i + 7 <= n) {
				uint64_t d4 = p[-4] - p[-3], d5 = p[-5] - p[-4], d6 = p[-6] - p[-5];
				if (!(ecpi_rt_span_wide(d0, 16) | ecpi_rt_span_wide(d1, 16) | ecpi_rt_span_wide(d2, 16) |
				      ecpi_rt_span_wide(d3, 16) | ecpi_rt_span_wide(d4, 16) | ecpi_rt_span_wide(d5, 16) |
				      ecpi_rt_span_wide(d6, 16))) {
					const uint64_t m = 0xffff;
					rec[at++ & mask] = (struct ecpi_rt_record){k16 | (d0 & m) << 32 | (d1 & m) << 16 | (d2 & m),
					                                           (d3 & m) << 48 | (d4 & m) << 32 | (d5 & m) << 16 | (d6 & m)};
					i += 7;
					continue;
				}
			}
			if (!(ecpi_rt_span_wide(d0, 28) | ecpi_rt_span_wide(d1, 28) | ecpi_rt_span_wide(d2, 28) | ecpi_rt_span_wide(d3, 28))) {
				const uint64_t m = (1ull << 28) - 1, m32 = 0xffffffff;
				rec[at++ & mask] = (struct ecpi_rt_record){k28 | (d0 & m) << 28 | (d1 & m), (d2 & m32) << 32 | (d3 & m32)};
				i += 4;
				continue;
			}
		}
		uint64_t next = i + 1 < n ? p[-1] & ECPI_RT_PAYLOAD_MASK : 0;
		rec[at++ & mask] = (struct ecpi_rt_record){kblock | (p[0] & ECPI_RT_PAYLOAD_MASK), next};
		i += 2;
	}
	return (uint32_t)(at - start);
}

/* Records a burst stages before copying them to the ring: 4 KiB, which
 * stays in the L1 cache. Writing each block entry straight into the ring
 * (a shared mapping the consumer reads on another core) cost a coherence
 * miss every four records, inside the time of the path being recorded:
 * orders' price path measured 52-105 ns at p10 and 96-145 ns on average
 * over runs on one host, against 140 and 150 ns timed without ecpi (so
 * its variation outranked the cache-missing path's). */
#define ECPI_RT_STAGE_RECORDS 256

extern __thread struct ecpi_rt_thread ecpi_rt_tls __attribute__((tls_model("initial-exec")));
extern volatile uint32_t ecpi_rt_features;

/* Makes the records written so far visible to the consumer. Producers
 * publish in batches (ECPI_RT_PUBLISH_EVERY records, the end of a window,
 * a wait for room, the thread's end), not per record: the consumer polls
 * `head`, and a store to a line another core keeps reading costs a
 * coherence miss (about 100 ns per block entry here when every record was
 * published, ten times the record's own cost). */
#define ECPI_RT_PUBLISH_EVERY 64
#define ECPI_RT_SPAN_PUBLISH_EVERY 1024

static inline void ecpi_rt_publish(struct ecpi_rt_thread *t)
{
	__atomic_store_n(&t->ring->head, t->head, __ATOMIC_RELEASE);
}

/* A MEMREF record's first word. */
static inline uint64_t ecpi_rt_memref_word(uint64_t addr, unsigned size_log2, unsigned write)
{
	return ((uint64_t)ECPI_RT_REC_MEMREF << ECPI_RT_KIND_SHIFT) | (write ? ECPI_RT_MEMREF_WRITE : 0) |
	       ((uint64_t)size_log2 << ECPI_RT_MEMREF_SIZE_SHIFT) | (addr & ECPI_RT_MEMREF_ADDR_MASK);
}

/* The first and last line numbers a MEMREF word's reference touches
 * (lines of 1 << shift bytes). */
static inline uint64_t ecpi_rt_memref_line(uint64_t w0, uint64_t shift)
{
	return (w0 & ECPI_RT_MEMREF_ADDR_MASK) >> shift;
}
static inline uint64_t ecpi_rt_memref_last_line(uint64_t w0, uint64_t shift)
{
	uint64_t addr = w0 & ECPI_RT_MEMREF_ADDR_MASK;
	return (addr + (1ull << ((w0 >> ECPI_RT_MEMREF_SIZE_SHIFT) & 7)) - 1) >> shift;
}

/* Notes a reference the thread records (MEMREF or MEMREF_SET; with
 * header.set_hit_mask): its first line is now the last its entry of the
 * table saw. A reference over two lines also touches the next line's
 * first-level set, whose entry then forgets what it held. */
static inline void ecpi_rt_set_note(struct ecpi_rt_thread *t, uint64_t w0)
{
	if (!t->set_hit_mask)
		return;
	uint64_t line = ecpi_rt_memref_line(w0, t->set_shift), last = ecpi_rt_memref_last_line(w0, t->set_shift);
	t->set_last_line[line & t->set_hit_mask] = line + 1;
	if (last != line)
		t->set_last_line[last & t->set_hit_mask] = 0;
}

/* MemSpy 7.3 with a time-sampled first level (header.set_hit_mask): 1 when
 * a sampled set's reference outside a window touches one line, the line
 * of the last recorded reference to its entry of the table. Every
 * reference to a sampled set is recorded (or settled here) and every line
 * of a first-level set falls in one entry, so nothing touched that set
 * since: in the set-sampled simulator the line is in its set's most recent
 * way, a hit that moves nothing, and lower levels never see it (an
 * eviction below removes lines of the evicting line's entry, whose line
 * is then the evicting one). Only the first level's counts in that
 * simulator would count it, and the report takes the first level from the
 * windows. Counted, not recorded: on SQLite most of the sampled sets'
 * references are such hits. */
static inline int ecpi_rt_set_hit(struct ecpi_rt_thread *t, uint64_t w0)
{
	if (!t->set_hit_mask)
		return 0;
	uint64_t line = ecpi_rt_memref_line(w0, t->set_shift);
	if (t->set_last_line[line & t->set_hit_mask] != line + 1 || ecpi_rt_memref_last_line(w0, t->set_shift) != line)
		return 0;
	t->set_hits++;
	return 1;
}

/* The two common cases of the slow path, on an active thread with room in
 * its ring: a reference inside an ON window, neither the window's first
 * nor its last (on_left > 1), whose countdown stays at 1 (as
 * ecpi_rt_sampler_step would keep it); and, outside windows, a reference
 * to a sampled set (MemSpy 7.3; the countdown has not run out), recorded
 * as MEMREF_SET with the time sampler untouched. Records it and returns
 * 1; anything else returns 0 for ecpi_rt_memref_slow. At 1/10 on SQLite
 * the general slow path (state and feature checks, the sampler step, a
 * call to push) was 15% of the program's samples; at the default settings
 * on crc the sampled sets' references through it were 13%. */
static inline int ecpi_rt_memref_quick(struct ecpi_rt_thread *t, uint64_t w0, uint64_t pc)
{
	if (t->in_runtime || t->state != ECPI_RT_THREAD_ACTIVE || t->head + 1 - t->cached_tail > t->mask + 1ull)
		return 0;
	if (t->sampler.on_left > 1) {
		t->sampler.on_left--;
		t->sampler.countdown = 1;
	} else if (t->sampler.countdown != 0) {
		if (ecpi_rt_set_hit(t, w0))
			return 1;
		w0 = ((uint64_t)ECPI_RT_REC_MEMREF_SET << ECPI_RT_KIND_SHIFT) | (w0 & ECPI_RT_PAYLOAD_MASK);
	} else {
		return 0;
	}
	ecpi_rt_set_note(t, w0);
	t->records[t->head & t->mask] = (struct ecpi_rt_record){w0, pc};
	if (++t->head % ECPI_RT_PUBLISH_EVERY == 0)
		ecpi_rt_publish(t);
	return 1;
}

/* The fast path's test (rt_memtrace*.c): 1 when the reference needs the
 * slow path: its countdown ran out (a window), or its line is in a sampled
 * set. One decrement and a branch, then a shift, a bit test and a branch
 * (x86's bt takes the bit index modulo 64 itself). */
#define ECPI_RT_MEMREF_NEEDS_SLOW(t, addr)                                                         \
	(__builtin_expect(--(t).sampler.countdown == 0, 0) ||                                          \
	 __builtin_expect(((t).set_bitmap >> (((uint64_t)(uintptr_t)(addr) >> (t).set_shift) & 63)) & 1, 0))

/* Slow paths (rt_core.c). */
void ecpi_rt_memref_slow(uint64_t addr, unsigned size_log2, unsigned write, uint64_t pc);
void ecpi_rt_note_alloc(void *p, uint64_t size, enum ecpi_rt_allocator allocator, void *site);
void ecpi_rt_note_free(void *p);
void ecpi_rt_block_slow(uint64_t pc);
void ecpi_rt_span_slow(uint64_t pc); /* rt_spans.c: the countdown of an inline build ran out */
void ecpi_rt_stage_push(struct ecpi_rt_thread *t, uint64_t w0, uint64_t w1);
void ecpi_rt_stage_flush(struct ecpi_rt_thread *t, int mid_burst);
/* Room for n records at the ring's head (waiting for the consumer, as a
 * burst's copy does): the records then go straight to
 * t->records[(t->head + i) & t->mask], and ecpi_rt_ring_commit makes them
 * count. 0 when the consumer is gone (they are counted as dropped). */
int ecpi_rt_ring_reserve(struct ecpi_rt_thread *t, uint32_t n);
void ecpi_rt_ring_commit(struct ecpi_rt_thread *t, uint32_t n);
void __sanitizer_cov_trace_pc_guard(uint32_t *guard);

/* The time stamp counter, read once every earlier instruction has
 * completed (lfence; rdtsc). A bare rdtsc may run before the block before
 * it finished, while that block's multiplications or misses are still in
 * flight, and how much it overlaps varies: orders' installment path (about
 * 150 ns of libm arithmetic timed without ecpi) read a basetime of 40-50 ns
 * in half the recordings and 80-90 ns in the others, and its variation then
 * outranked the cache-missing path's in 4 of 8. Fenced: 77-96 ns and 8 of
 * 8 (docs/PATHS.md). The fence doubles a recorded entry's cost (about 12
 * to 23 ns, measured and subtracted); with the ring written directly it
 * had also made that cost vary with the stores in flight, which the
 * staged burst (ECPI_RT_STAGE_RECORDS) no longer has. */
static inline uint64_t ecpi_rt_rdtsc_fenced(void)
{
	uint32_t lo, hi;
	__asm__ volatile("lfence\n\trdtsc" : "=a"(lo), "=d"(hi)::"memory");
	return ((uint64_t)hi << 32) | lo;
}

/* The time stamp counter, unfenced: for intervals much longer than the
 * work in flight (the runtime's own pauses, the calibration's batches). */
static inline uint64_t ecpi_rt_rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}
/* Maps the runtime's own heap (rt_malloc.c): what libc allocates while a
 * thread's in_runtime is set. Called once, by the constructor, when an ecpi
 * run controls the program. */
void ecpi_rt_private_heap_init(void);

#endif
