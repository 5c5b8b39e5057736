/* The protocol between ecpi's in-process runtime (runtime/, linked into
 * programs built with `ecpi flags ...`) and the ecpi process that controls a
 * run (`ecpi cachesim`, `ecpi paths record`). Plain C, fixed-width
 * types; the C++ side static_asserts every size. Bump ECPI_RT_ABI_VERSION
 * whenever a struct or a record layout below changes.
 *
 * Control handshake: the ecpi verb creates a shared-memory region (a memfd),
 * fills in struct ecpi_rt_header, and starts the program with the region's
 * file descriptor in the environment:
 *
 *     ECPI_RT_CONTROL=<fd>
 *
 * The runtime maps it in a constructor, checks magic, ABI version and size,
 * removes the variable and closes the descriptor (so children and exec'd
 * programs are not controlled), and enables the features the header asks
 * for. Without the variable the runtime stays off: every callback costs one
 * decrement and a branch.
 *
 * Rings: the region holds ring_count single-producer single-consumer rings
 * after the header, one per program thread (claimed on a thread's first
 * event in an ON window; a thread that finds none free is counted in
 * threads_without_ring and stays off). Records are 16 bytes; the kind is the
 * top byte of the first word (retsnoop: every record starts with a tag; the
 * consumer rejects unknown tags). The producer publishes `head` with a
 * release store in batches (every 64 records, at the end of a window,
 * before it waits for room, and with END); the consumer publishes `tail`.
 * Block entries (paths) are staged per thread and copied into the ring at
 * the end of a burst, or every ECPI_RT_STAGE_RECORDS records with a PAUSE
 * record that says how long the copy took.
 */
#ifndef ECPI_RT_ABI_H
#define ECPI_RT_ABI_H

#include <stdint.h>

#define ECPI_RT_MAGIC 0x31545250494345ULL /* "ECPIRT1" little-endian */
#define ECPI_RT_ABI_VERSION 8
#define ECPI_RT_CONTROL_ENV "ECPI_RT_CONTROL"

/* Features a controlling verb may ask for (header.features_requested). */
#define ECPI_RT_FEATURE_MEMTRACE 1u /* __sanitizer_cov_load* and _store* callbacks, heap events */
#define ECPI_RT_FEATURE_PATHS 2u    /* __sanitizer_cov_trace_pc_guard: bursts of timed block entries */

#define ECPI_RT_MAX_MODULES 64
#define ECPI_RT_MODULE_PATH 240

/* Record kinds (top byte of word0). */
enum ecpi_rt_record_kind {
	ECPI_RT_REC_MEMREF = 1,     /* w0: kind | write<<55 | log2(size)<<52 | address (52 bits); w1: pc */
	ECPI_RT_REC_WINDOW = 2,     /* an ON window begins. w0: kind | window index; w1: events skipped since the last window */
	ECPI_RT_REC_ALLOC = 3,      /* w0: kind | size (56 bits); w1: address. Always followed by ALLOC_SITE */
	ECPI_RT_REC_ALLOC_SITE = 4, /* w0: kind | allocator (enum ecpi_rt_allocator); w1: call-site pc */
	ECPI_RT_REC_FREE = 5,       /* w0: kind; w1: address */
	ECPI_RT_REC_THREAD = 6,     /* w0: kind | tid; w1: lowest stack address. Always followed by THREAD_STACK_END */
	ECPI_RT_REC_THREAD_STACK_END = 7, /* w0: kind; w1: first address past the stack */
	ECPI_RT_REC_END = 8,        /* the thread ends. w0: kind | records before it in the ring; w1: events skipped since the last window */
	/* Set sampling (MemSpy 7.3): a reference outside an ON window whose
	 * address passes the header's set filter (bit (address >> set_shift) & 63
	 * of set_bitmap). Laid out as MEMREF; it is also one of the events the next
	 * WINDOW or END counts as skipped (by time sampling). */
	ECPI_RT_REC_MEMREF_SET = 9,
	/* Set sampling with header.set_hit_mask: references outside windows to
	 * a sampled set that the runtime settled as certain first-level hits
	 * and did not record (ecpi_rt_set_hit in rt_internal.h), counted since
	 * the thread's last SET_HITS record. w0: kind; w1: the count. Written
	 * before END. */
	ECPI_RT_REC_SET_HITS = 10,
	/* Paths (VPP 4): a block's callback ran inside an ON window (a burst).
	 * w0: kind | return address of the callback (56 bits), which lies in the
	 * block (the callback is its first call); w1: time stamp counter. */
	ECPI_RT_REC_BLOCK = 16,
	/* The runtime copied a burst's staged records out after the last BLOCK
	 * record's stamp: that path's time holds w1 ticks of the runtime's own
	 * work, to be subtracted. w0: kind. */
	ECPI_RT_REC_PAUSE = 17,
	/* Spans (`ecpi flags paths --inline`): the program ran the blocks of a
	 * span between two unfenced clock reads, with nothing recorded in
	 * between. w0: kind | context << 16 | blocks (16 bits each); w1: the
	 * start stamp. Followed by SPAN_BLOCK, SPAN_DELTA16 and SPAN_DELTA28
	 * records holding context + blocks + 1 block entries in order: the
	 * context blocks entered before the span (to tell how its first block
	 * was reached), its blocks, and the block whose entry ended it; then
	 * SPAN_END. The first record after SPAN is a SPAN_BLOCK. */
	ECPI_RT_REC_SPAN = 18,
	/* Two block entries of a span. w0: kind | an address in the block, after
	 * its first instruction (read as BLOCK's: the block holding w0 - 1); w1:
	 * the next entry's address, read the same way, or 0 after a span's last
	 * entry. Two to a record: a span's records are most of what ecpi reads. */
	ECPI_RT_REC_SPAN_BLOCK = 19,
	/* The span's end. w0: kind; w1: the end stamp. */
	ECPI_RT_REC_SPAN_END = 20,
	/* Seven block entries of a span, each as its address minus the entry's
	 * before it (a signed 16-bit field; the entry before the first is the
	 * last of the record before). w0: kind | d0 << 32 | d1 << 16 | d2;
	 * w1: d3 << 48 | d4 << 32 | d5 << 16 | d6. A span's entries are most
	 * of what the runtime writes into the ring and ecpi reads: a loop's
	 * blocks lie close together. */
	ECPI_RT_REC_SPAN_DELTA16 = 21,
	/* Four block entries of a span, as SPAN_DELTA16's but in signed 28-bit
	 * fields. w0: kind | d0 << 28 | d1; w1: d2 << 32 | d3 (each in 32
	 * bits, within the 28-bit range). */
	ECPI_RT_REC_SPAN_DELTA28 = 22,
	/* 23..31 reserved for paths. */
};

enum ecpi_rt_allocator {
	ECPI_RT_ALLOC_MALLOC = 0,
	ECPI_RT_ALLOC_CALLOC = 1,
	ECPI_RT_ALLOC_REALLOC = 2,
	ECPI_RT_ALLOC_NEW = 3,
	ECPI_RT_ALLOC_NEW_ARRAY = 4,
	ECPI_RT_ALLOC_ALIGNED = 5, /* aligned_alloc, posix_memalign, memalign */
};

#define ECPI_RT_KIND_SHIFT 56
#define ECPI_RT_PAYLOAD_MASK ((1ULL << 56) - 1)
#define ECPI_RT_MEMREF_WRITE (1ULL << 55)
#define ECPI_RT_MEMREF_SIZE_SHIFT 52
#define ECPI_RT_MEMREF_ADDR_MASK ((1ULL << 52) - 1)

struct ecpi_rt_record {
	uint64_t w0;
	uint64_t w1;
};

struct ecpi_rt_module {
	uint64_t base;  /* load bias (dlpi_addr): runtime address - ELF virtual address */
	uint64_t start; /* lowest mapped address of its PT_LOAD segments */
	uint64_t end;   /* first address past them */
	char path[ECPI_RT_MODULE_PATH]; /* NUL-terminated; "" for the main program when unknown */
};

/* Written by the ecpi verb before the program starts, except the fields
 * marked "runtime", which the runtime writes. */
struct ecpi_rt_header {
	uint64_t magic;
	uint32_t abi_version;
	uint32_t header_size;      /* sizeof(struct ecpi_rt_header) */
	uint64_t region_size;      /* bytes of the whole mapping */
	uint32_t features_requested;
	uint32_t features_active;  /* runtime: what it enabled */
	/* Sampling core (MemSpy 4.1, 7.2): ON windows of `window` events, OFF
	 * gaps uniformly random within off_mean/4 of off_mean (ecpi_rt_sampling.h), so the
	 * ON fraction is window / (window + off_mean). off_mean 0: always ON. */
	uint64_t window;
	uint64_t off_mean;
	uint64_t seed;
	/* Set sampling (MemSpy 7.3): every reference whose bit
	 * ((address >> set_shift) & 63) of set_bitmap is set is recorded, in a
	 * window or not (the lines of a random subset of cache sets, chosen by
	 * the line number's low six bits). set_bitmap 0: none. */
	uint64_t set_bitmap;
	uint64_t set_shift;
	/* The sampled sets rotate (MemSpy 7.3's non-representative sets): from
	 * window k on, the filter is set_bitmap rotated left by
	 * (k / set_rotate_windows) * set_rotate_step bits, so over a run every
	 * group of sets takes its turn; in the last set_rotate_warm windows of
	 * a turn the next turn's groups are added, to warm them
	 * (ecpi_rt_set_bitmap_at). set_rotate_windows 0: a fixed choice. */
	uint32_t set_rotate_step;
	uint32_t set_rotate_windows;
	uint32_t set_rotate_warm;
	/* Nonzero: outside windows, a sampled set's reference to the line that
	 * the thread's last recorded reference to its first-level set (in or
	 * out of a window) touched is not recorded, only counted (SET_HITS):
	 * in the set-sampled simulator it is a hit in the most recent way,
	 * which changes no state, and only a time-sampled first level, whose
	 * counts come from the windows, would count it. The value is the mask
	 * of the line number's bits that index the runtime's table of last
	 * lines (groups of sets - 1: the first level's sets are at least as
	 * many, so each of its sets falls in one entry). 0: off (a set-sampled
	 * first level, rotating sets). */
	uint32_t set_hit_mask;
	uint32_t ring_count;
	uint32_t ring_records;     /* records per ring, a power of two */
	uint32_t rings_claimed;    /* runtime, atomic */
	uint32_t runtime_pid;      /* runtime: the controlled process */
	uint64_t threads_without_ring; /* runtime, atomic */
	uint64_t stall_ns;         /* runtime, atomic: time producers waited for ring space */
	uint32_t consumer_gone;    /* set by ecpi when it stops reading: producers then drop */
	uint32_t module_count;     /* runtime */
	/* runtime, paths: what one block entry inside a burst costs the program,
	 * in time stamp counter ticks (the callback, the clock read and the
	 * record), measured at start on this thread with warm caches; the
	 * analysis subtracts it per block from path times. 0: not measured. */
	uint64_t block_cost_ticks;
	struct ecpi_rt_module modules[ECPI_RT_MAX_MODULES]; /* runtime, at start */
	char runtime_error[256];   /* runtime: why it did not enable itself, if it did not */
};

/* One ring's control block; records follow it. head and tail on their own
 * cache lines so producer and consumer do not share one. */
struct ecpi_rt_ring {
	uint64_t head;             /* producer: records written (monotonic) */
	uint8_t pad0[56];
	uint64_t tail;             /* consumer: records consumed (monotonic) */
	uint8_t pad1[56];
	uint32_t state;            /* enum ecpi_rt_ring_state, producer */
	uint32_t tid;
	uint64_t dropped;          /* records dropped after the consumer went away */
	uint8_t pad2[48];
};

enum ecpi_rt_ring_state {
	ECPI_RT_RING_FREE = 0,
	ECPI_RT_RING_ACTIVE = 1,
	ECPI_RT_RING_CLOSED = 2, /* the thread ended; END is its last record */
};

/* Bytes of one ring with its records. */
#define ECPI_RT_RING_BYTES(records) (sizeof(struct ecpi_rt_ring) + (uint64_t)(records) * sizeof(struct ecpi_rt_record))
/* Offset of ring i in the region (the header padded to 4 KiB first). */
#define ECPI_RT_HEADER_BYTES ((sizeof(struct ecpi_rt_header) + 4095) & ~(uint64_t)4095)
#define ECPI_RT_RING_OFFSET(i, records) (ECPI_RT_HEADER_BYTES + (uint64_t)(i) * ECPI_RT_RING_BYTES(records))

/* The set filter's bitmap from the start of window `window` on (see
 * header.set_rotate_windows); the runtime and ecpi's decoder both use it. */
static inline uint64_t ecpi_rt_rotl64(uint64_t x, uint64_t r)
{
	r &= 63;
	return r ? (x << r) | (x >> (64 - r)) : x;
}

static inline uint64_t ecpi_rt_set_bitmap_at(uint64_t base, uint32_t step, uint32_t period, uint32_t warm, uint64_t window)
{
	uint64_t turn, bitmap;
	if (period == 0)
		return base;
	turn = window / period;
	bitmap = ecpi_rt_rotl64(base, turn * step);
	if (window % period + warm >= period)
		bitmap |= ecpi_rt_rotl64(base, (turn + 1) * step);
	return bitmap;
}

#endif /* ECPI_RT_ABI_H */
