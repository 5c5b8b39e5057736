// SPDX-License-Identifier: GPL-2.0
/* The sampling handler (DCPI 4.2): runs on every perf-event overflow, counts
 * (tgid, pc, event, kernel) in a per-CPU hash table, and spills to a ring
 * buffer only when the table cannot take the sample. Nothing is printed and
 * every drop is counted. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "ecpi_abi.h"

char LICENSE[] SEC("license") = "GPL";

/* The context only allows full-width loads of the registers. */
#define ECPI_REG(ctx, name) (*(volatile __u64 *)&(ctx)->regs.name)

/* Set by the loader before load. */
const volatile bool filter_tgids = false;   /* only count tgids in tracked_tgids */
const volatile bool capture_stacks = false; /* -g: every sample goes to the ring buffer with stacks */
const volatile bool unwind_cfi = false;     /* -g: user stacks walked by CFI rows (else frame pointers only) */
const volatile __u32 exclude_tgid = 0;      /* the daemon's own tgid with --exclude-self (0: none) */
/* --registers N: one user-mode sample in N (per CPU) keeps its registers;
 * 0: none, 1: every one. */
const volatile __u32 registers_every = 0;
#ifdef ECPI_TEST_HOOKS
/* Test builds only (bpf/CMakeLists.txt builds a second object): every sample
 * first spins this long, so a test can make sampling expensive and check that
 * the overhead budget's calibration lowers the rate, and, since user space may
 * change it while sampling runs (.data, not .rodata), that the check while
 * running lowers it (tests/bpf/budget_calibration.cpp). */
volatile __u64 test_sample_cost_ns = 0;
#endif

/* Which of the two tables the handler writes. The loader flips it, waits for
 * an RCU grace period (every handler runs under rcu_read_lock), then drains
 * the other table with no writer left: no sample is lost or counted twice. */
__u32 active_slot = 0;

#define ECPI_TABLE_ENTRIES 16384 /* the loader resizes before load */

struct sample_table {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, ECPI_TABLE_ENTRIES);
	__type(key, struct ecpi_sample_key);
	__type(value, __u64);
};
struct sample_table counts_0 SEC(".maps");
struct sample_table counts_1 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} samples_rb SEC(".maps");

/* Register snapshots have a ring of their own, so that their volume never
 * costs an ordinary sample its place (the loader sizes it). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} registers_rb SEC(".maps");

/* Argument strings read at exec (ecpi_exec_record); sized by the loader.
 * A record it cannot take costs only the fallback to /proc, counted in
 * exec_args_lost. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 512 << 10);
} exec_rb SEC(".maps");

__u64 exec_args_lost = 0;

/* An exec record is built here, then sent with its true size. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ecpi_exec_record);
} exec_scratch SEC(".maps");

/* Samples since the last snapshot, per CPU (registers_every > 1 only). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} register_ticks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ECPI_COUNTER_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} tracked_tgids SEC(".maps");

/* Samples that found their CPU in its idle task (pid 0), per event and per
 * CPU: counted, never aggregated by pc (issue 20: idle is kept apart from
 * the shares; whatever the idle function is called on this kernel or
 * hypervisor, the idle task is pid 0). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ECPI_MAX_EVENTS);
	__type(key, __u32);
	__type(value, __u64);
} idle_samples SEC(".maps");

/* CFI unwinding (ecpi_abi.h): the rows of every image in one array, each
 * image's slice in unwind_tables, each process's executable mappings in
 * unwind_processes. The loader sizes and fills them (loader/unwind/unwinder.cpp). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE); /* user space walks stack copies with the same rows */
	__type(key, __u32);
	__type(value, struct ecpi_unwind_row);
} unwind_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ECPI_UNWIND_MAX_TABLES);
	__type(key, __u32);
	__type(value, struct ecpi_unwind_table);
} unwind_tables SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct ecpi_unwind_process);
} unwind_processes SEC(".maps");

/* The tables' page indexes (ecpi_unwind_table), one slice per table. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} unwind_pages SEC(".maps");

/* The record of a CFI-walked sample is built here, then copied to the ring:
 * the stack alone, or the registers and the stack in one record. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ecpi_register_stack_record);
} stack_scratch SEC(".maps");

/* A window of the user stack the CFI walk reads its frames from: one
 * bpf_probe_read_user for many frames instead of one or two per frame. A
 * window never reaches past the end of the 4 KiB page it starts in (that
 * page holds the frame being read, so it is mapped; the next one up may not
 * be). Its length comes from the last walk on this CPU: as many bytes as
 * that walk read above its sp (extent), at least ECPI_UNWIND_WINDOW_MIN, so
 * that a steady workload's stack within one page takes one read, not one per
 * 512 bytes (each read has a fixed cost of its own). Only a length: the
 * bytes are the stack's, whatever the last walk was. Two spare words keep
 * the verifier's view of a 16-byte read inside the value. */
#define ECPI_UNWIND_WINDOW 4096 /* a page, the most one read takes */
#define ECPI_UNWIND_WINDOW_MIN 512
struct stack_window {
	__u64 words[ECPI_UNWIND_WINDOW / 8 + 2];
	__u64 extent; /* bytes above its first sp the last walk read; 0: none */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_window);
} unwind_window SEC(".maps");

/* Rows found by earlier samples, per CPU: a steady workload's samples walk
 * the same return addresses again and again, and a pc found here needs
 * neither the mapping search nor the row search. Sets of two ways, chosen
 * by the pc's 16-byte chunk (the pcs of one hot loop share a few entries),
 * the newest row in way 0: two pcs of a stack that fall in one set no
 * longer evict each other every sample, as they did in one slot each
 * (direct-mapped). An entry holds for the process entry it was found in
 * (its generation, which the loader renews on every write of an entry),
 * and only found rows are kept, never a cut. */
#define ECPI_UNWIND_ROW_SETS 512 /* a power of two */
#define ECPI_UNWIND_ROW_WAYS 2
struct row_cache_entry {
	__u32 generation; /* ecpi_unwind_process.generation; 0: empty */
	__u32 mapping;
	struct ecpi_unwind_row row;
	__u64 start, end; /* the pcs of the process that share the row */
};

struct row_cache_set {
	struct row_cache_entry way[ECPI_UNWIND_ROW_WAYS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ECPI_UNWIND_ROW_SETS);
	__type(key, __u32);
	__type(value, struct row_cache_set);
} unwind_row_cache SEC(".maps");

/* The frames of the last whole walk on this CPU (issue 29): a sample whose
 * stack shares its outer frames with it (a steady workload's samples differ
 * in their innermost frames only) replays them instead of walking them
 * again: no row lookups, no CFA rules. Exact: a walk from a frame (pc, sp,
 * bp) is a function of the process's rows (its entry's generation) and of
 * the stack words it reads, so the replay joins only at a frame with the
 * same pc, sp and bp (both return addresses: d >= 1, no signal frame), and
 * checks every word the memo's walk read above it (each caller's return
 * address at its sp - 8, its rbp where a rule restored it) against the
 * stack as it is now; at the first that differs the walk goes on by rows
 * from the last frame that held. Only walks that reached the thread root
 * are kept. Two buffers: a walk writes its frames into one while it may
 * replay from the other, then the one written becomes the memo. */
struct memo_frame {
	__u64 pc, sp, bp;
	__s64 bp_at; /* where the caller's rbp was read: its sp + 8 * bp_at; 0: rbp carried unchanged */
};

struct stack_memo {
	__u32 tgid;
	__u32 generation; /* ecpi_unwind_process.generation; 0: no memo */
	__u32 frames;     /* frames in buf[cur]: 0 .. frames - 1, the last the thread root */
	__u32 cur;        /* 0 or 1: which buffer is the memo */
	/* The walk under way on this CPU. Kept here, not in its walk_state: the
	 * verifier sees map-value fields as unknown numbers, so the walk's loop
	 * converges instead of becoming one state per value of a counter. */
	__u32 old_frames; /* frames of the memo this walk may join (0: none) */
	__u32 at;         /* the memo frame the walk is at or below (joining), or replays */
	__u32 replay;     /* 1 while frames come from the memo */
	__u32 keep;       /* 1 while this walk's frames may become the memo */
	__u32 replayed;   /* frames this walk took from the memo */
	__u32 pad;
	struct memo_frame buf[2][ECPI_MAX_USER_STACK_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_memo);
} unwind_memo SEC(".maps");

/* Per CPU: 0 walks that joined the memo, 1 frames replayed from it (read
 * by tests and `bench/unwind_sections.sh`). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} memo_stats SEC(".maps");

/* A stack copy (ECPI_RECORD_STACK_COPY) is built here, then sent with its size. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ecpi_stack_copy_record);
} stack_copy_scratch SEC(".maps");

static __always_inline void count(__u32 event, __u32 counter)
{
	__u32 slot = event * ECPI_COUNTER_MAX + counter;
	__u64 *value = bpf_map_lookup_elem(&counters, &slot);

	if (value)
		*value += 1; /* per-CPU: no atomics needed */
}

static __always_inline int spill_sample(const struct ecpi_sample_key *key)
{
	struct ecpi_sample_record *rec;

	rec = bpf_ringbuf_reserve(&samples_rb, sizeof(*rec), 0);
	if (!rec) {
		count(key->event, ECPI_COUNTER_RINGBUF_LOST);
		return 0;
	}
	rec->kind = ECPI_RECORD_SAMPLE;
	rec->pad = 0;
	rec->key = *key;
	/* The loader consumes on a timer; waking it per sample would cost more
	 * than the sample itself. */
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	count(key->event, ECPI_COUNTER_TABLE_FULL);
	return 0;
}

static __always_inline int aggregate(void *table, const struct ecpi_sample_key *key)
{
	__u64 one = 1, *value;
	long err;

	value = bpf_map_lookup_elem(table, key);
	if (value) {
		*value += 1;
		return 0;
	}
	err = bpf_map_update_elem(table, key, &one, BPF_NOEXIST);
	if (err == 0)
		return 0;
	if (err == -17 /* EEXIST: another CPU inserted the key just now */) {
		value = bpf_map_lookup_elem(table, key);
		if (value) {
			*value += 1;
			return 0;
		}
	}
	/* E2BIG (table full) or EBUSY (bucket locked in NMI): spill. */
	return spill_sample(key);
}

/* A stack record's header, and the kernel stack where the sample was taken
 * in the kernel (frame pointers: the kernel's own unwinder). */
static __always_inline void start_stack_record(struct bpf_perf_event_data *ctx, const struct ecpi_sample_key *key,
						struct ecpi_stack_record *rec, __u32 kind, __u64 now)
{
	long n;

	rec->kind = kind;
	rec->key = *key;
	rec->time_ns = now;
	rec->kernel_depth = 0;
	rec->user_depth = 0;
	if (!key->kernel)
		return;
	n = bpf_get_stack(ctx, rec->ips, ECPI_MAX_STACK_DEPTH * sizeof(__u64), 0);
	if (n > 0)
		rec->kernel_depth = n / sizeof(__u64);
	else
		count(key->event, ECPI_COUNTER_STACK_ERRORS);
}

static __always_inline int record_stack(struct bpf_perf_event_data *ctx, const struct ecpi_sample_key *key,
					__u64 now)
{
	struct ecpi_stack_record *rec;
	long n;

	rec = bpf_ringbuf_reserve(&samples_rb, sizeof(*rec), 0);
	if (!rec) {
		count(key->event, ECPI_COUNTER_RINGBUF_LOST);
		return 0;
	}
	start_stack_record(ctx, key, rec, ECPI_RECORD_STACK_SAMPLE, now);
	n = bpf_get_stack(ctx, &rec->ips[ECPI_MAX_STACK_DEPTH], ECPI_MAX_STACK_DEPTH * sizeof(__u64),
			  BPF_F_USER_STACK);
	if (n > 0) {
		rec->user_depth = n / sizeof(__u64);
		count(key->event, ECPI_COUNTER_STACK_FP);
	}
	/* n == 0 or an error for kernel threads and idle: no user stack. */
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}

/* ---- CFI walk ---- */

/* A row found for a pc, and the pcs [start, end) of the process that have
 * the same row (its table's rows from row.pc to the next row's pc, moved by
 * the mapping's bias and kept within the mapping). */
struct unwind_hit {
	struct ecpi_unwind_row row;
	__u32 mapping;
	__u32 pad;
	__u64 start, end;
};

struct walk_state {
	__u64 pc, sp, bp;
	struct ecpi_unwind_process *proc; /* looked up once per sample; NULL: no tables yet */
	struct ecpi_stack_record *rec;    /* the per-CPU record the frames go to (looked up once) */
	__u32 base;  /* the record's kernel frames: user frame d goes to ips[base + d] (packed) */
	__u32 depth;
	__u32 end; /* the ECPI_COUNTER_* saying how the walk ended; 0 while it goes on */
	__u32 exact; /* pc is an interrupted pc (after a signal frame), not a return address */
	__u32 mapping; /* index of the last frame's mapping: callers are mostly in the same image */
	struct unwind_hit last;    /* the last row found: a frame whose pc lies in its range needs no search */
	struct stack_window *win; /* the per-CPU window (looked up once); NULL: every read direct */
	__u64 win_start;          /* user address of win->words[0] */
	__u32 win_len;            /* bytes of the window read from win_start (0: none yet) */
	__u64 want;               /* a window should reach here: sp + the last walk's extent */
	struct stack_memo *memo;  /* the per-CPU memo and this walk's place in it; NULL: none used */
};

/* The index of the mapping of `pc` in the process's sorted mappings, trying
 * `hint` first; ECPI_UNWIND_MAX_MAPPINGS when none. Indices are masked
 * (ECPI_UNWIND_MAX_MAPPINGS is a power of two) so the verifier sees them
 * bounded whatever order the compiler gives the checks. A global function:
 * its caller is verified once with an index of unknown value, not once per
 * index its search can end on. */
__noinline int find_mapping(struct ecpi_unwind_process *p, __u64 pc, __u32 hint)
{
	__u32 lo = 0, hi, idx = hint & (ECPI_UNWIND_MAX_MAPPINGS - 1);

	if (!p)
		return ECPI_UNWIND_MAX_MAPPINGS;
	hi = p->count;

	if (p->mappings[idx].start <= pc && pc < p->mappings[idx].end)
		return idx;
	if (hi > ECPI_UNWIND_MAX_MAPPINGS)
		hi = ECPI_UNWIND_MAX_MAPPINGS;
	for (int k = 0; k < 9 && lo < hi; k++) { /* 2^9 > ECPI_UNWIND_MAX_MAPPINGS */
		__u32 mid = (lo + (hi - lo) / 2) & (ECPI_UNWIND_MAX_MAPPINGS - 1);

		if (p->mappings[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return ECPI_UNWIND_MAX_MAPPINGS;
	idx = (lo - 1) & (ECPI_UNWIND_MAX_MAPPINGS - 1);
	if (pc >= p->mappings[idx].end)
		return ECPI_UNWIND_MAX_MAPPINGS;
	return idx;
}

/* Narrows the search for `vaddr` to [*lo, *hi) by the table's page index;
 * leaves the whole table where it has none. *end: a pc at or below the
 * first row above the range (the next page's start; 0: none known). */
static __always_inline void page_range(const struct ecpi_unwind_table *t, __u32 vaddr, __u32 *lo, __u32 *hi,
				       __u64 *end)
{
	__u32 page = vaddr >> ECPI_UNWIND_PAGE_SHIFT, k, idx;
	__u32 *a, *b;

	*lo = 0;
	*hi = t->rows;
	*end = 0;
	if (t->pages == 0)
		return;
	if (page < t->base_page) { /* below the first row */
		*hi = 0;
		return;
	}
	k = page - t->base_page;
	if (k >= t->pages) { /* past the last row's page: the last row */
		*lo = t->rows;
		return;
	}
	idx = t->first_page + k;
	a = bpf_map_lookup_elem(&unwind_pages, &idx);
	idx += 1;
	b = bpf_map_lookup_elem(&unwind_pages, &idx);
	if (a && b && *a <= *b && *b <= t->rows) {
		*lo = *a;
		*hi = *b;
		*end = (__u64)(page + 1) << ECPI_UNWIND_PAGE_SHIFT;
	}
}

/* The row of `vaddr` in table `table`: 0 with *out filled (out->end: the
 * next row's pc, or a pc below it, or 0: none known), or the cut reason.
 * Searches [lo, hi) for the first row above vaddr: lo ends as the number of
 * rows at or below it. */
static __always_inline __u32 find_row(__u32 table, __u64 vaddr, struct unwind_hit *out)
{
	struct ecpi_unwind_table *t = bpf_map_lookup_elem(&unwind_tables, &table);
	struct ecpi_unwind_row *r;
	__u32 lo, hi, idx;
	__u64 end;

	if (!t || t->rows == 0)
		return ECPI_COUNTER_CUT_NO_TABLE;
	if (vaddr > 0xffffffffULL)
		return ECPI_COUNTER_CUT_NO_ROW;
	page_range(t, vaddr, &lo, &hi, &end);
	for (int k = 0; k < 25 && lo < hi; k++) { /* tables hold < 2^24 rows (loader's limit) */
		__u32 mid = lo + (hi - lo) / 2;

		idx = t->first_row + mid;
		r = bpf_map_lookup_elem(&unwind_rows, &idx);
		if (!r)
			return ECPI_COUNTER_CUT_NO_TABLE;
		if (r->pc <= vaddr) {
			lo = mid + 1;
		} else {
			hi = mid;
			end = r->pc;
		}
	}
	if (lo == 0)
		return ECPI_COUNTER_CUT_NO_ROW;
	idx = t->first_row + lo - 1;
	r = bpf_map_lookup_elem(&unwind_rows, &idx);
	if (!r)
		return ECPI_COUNTER_CUT_NO_TABLE;
	out->row = *r;
	out->end = end;
	if (r->kind == ECPI_UNWIND_NONE)
		return ECPI_COUNTER_CUT_NO_ROW;
	if (r->kind == ECPI_UNWIND_INVALID)
		return ECPI_COUNTER_CUT_UNSUPPORTED;
	return 0;
}

/* The row of `pc` in process `p`, trying mapping `hint` first: the cut
 * reason (0: found, *hit filled with the row and the pcs that share it),
 * hit->mapping the pc's mapping index. A global function: the verifier
 * checks it once, not once per path of the walk that calls it (its two
 * searches would multiply the states). */
__noinline int unwind_lookup(struct ecpi_unwind_process *p, __u32 hint, __u64 pc, struct unwind_hit *hit)
{
	struct ecpi_unwind_mapping *m;
	struct row_cache_set *s;
	struct row_cache_entry *c;
	__u64 start, end;
	__u32 idx, why, slot;

	if (!hit || !p)
		return ECPI_COUNTER_CUT_NO_TABLE;
	hit->start = hit->end = 0;
	slot = (((pc >> 4) ^ p->generation) * 0x9e3779b97f4a7c15ULL) >> 55 & (ECPI_UNWIND_ROW_SETS - 1); /* 2^9 sets */
	s = bpf_map_lookup_elem(&unwind_row_cache, &slot);
	if (s && p->generation) {
#pragma unroll
		for (int k = 0; k < ECPI_UNWIND_ROW_WAYS; k++) {
			c = &s->way[k];
			if (c->generation == p->generation && c->start <= pc && pc < c->end) {
				hit->row = c->row;
				hit->mapping = c->mapping;
				hit->start = c->start;
				hit->end = c->end;
				return 0;
			}
		}
	}
	idx = find_mapping(p, pc, hint);
	if (idx >= ECPI_UNWIND_MAX_MAPPINGS)
		return ECPI_COUNTER_CUT_NO_ROW;
	idx &= ECPI_UNWIND_MAX_MAPPINGS - 1;
	hit->mapping = idx;
	m = &p->mappings[idx];
	if (m->table == ECPI_UNWIND_NO_TABLE)
		return ECPI_COUNTER_CUT_NO_TABLE;
	why = find_row(m->table, pc - m->bias, hit);
	if (why) { /* a cut is never kept for the next frame: its range is empty */
		hit->start = hit->end = 0;
		return why;
	}
	start = hit->row.pc + m->bias;
	end = hit->end ? hit->end + m->bias : start + 1;
	hit->start = start < m->start ? m->start : start;
	hit->end = end > m->end ? m->end : end;
	if (s && p->generation) {
		s->way[1] = s->way[0]; /* the older row of the set goes */
		c = &s->way[0];
		c->generation = p->generation;
		c->mapping = idx;
		c->row = hit->row;
		c->start = hit->start;
		c->end = hit->end;
	}
	return 0;
}

/* The row for a frame's pc (pc - 1 for a return address): 0 or a cut
 * reason. The last frame's row first: in a recursion every frame has it. */
static __always_inline __u32 row_for(struct walk_state *w, __u32 d, struct ecpi_unwind_row *row)
{
	struct ecpi_unwind_process *p = w->proc;
	__u64 pc = d > 0 && !w->exact ? w->pc - 1 : w->pc;
	int r;

	if (!p)
		return ECPI_COUNTER_CUT_NO_TABLE;
	if (pc >= w->last.start && pc < w->last.end) {
		*row = w->last.row;
		return 0;
	}
	r = unwind_lookup(p, w->mapping, pc, &w->last);
	w->mapping = w->last.mapping;
	*row = w->last.row;
	return r;
}

/* Reads the window anew from `addr` (8-byte aligned) up to `want`, at
 * least ECPI_UNWIND_WINDOW_MIN bytes, never past addr's page: the bytes
 * read, 0 where fewer than `n` fit in the page (read those directly), < 0
 * where the stack is unreadable. A global function: the verifier checks
 * its lengths once, and its caller, inlined in every read of the walk,
 * sees one unknown length instead of a state per branch taken here. */
__noinline long window_fill(struct stack_window *win, __u64 addr, __u64 want, __u32 n)
{
	__u64 len = 4096 - (addr & 4095);

	if (!win)
		return -1;
	if (want < addr + ECPI_UNWIND_WINDOW_MIN) {
		if (len > ECPI_UNWIND_WINDOW_MIN)
			len = ECPI_UNWIND_WINDOW_MIN;
	} else if (want - addr < len) {
		len = (want - addr + 7) & ~7ULL;
	}
	if (len < n)
		return 0;
	if (len > ECPI_UNWIND_WINDOW)
		len = ECPI_UNWIND_WINDOW;
	if (bpf_probe_read_user(win->words, len, (void *)addr))
		return -1;
	return len;
}

/* `n` bytes (8 or 16) of user stack at `addr` into out[0 .. n / 8): from the
 * window when it holds them, else after reading the window anew from addr
 * (window_fill); an unaligned address or a read that crosses a page goes to
 * the stack directly. The same bytes as a direct read: the sampled thread
 * is stopped while its handler runs. */
static __always_inline long stack_read(struct walk_state *w, __u64 addr, __u64 *out, __u32 n)
{
	struct stack_window *win = w->win;
	__u64 off = addr - w->win_start;
	long len;
	__u32 i;

	if (!win || (addr & 7))
		return bpf_probe_read_user(out, n, (void *)addr);
	if (addr < w->win_start || off + n > w->win_len) {
		len = window_fill(win, addr, w->want, n);
		if (len == 0)
			return bpf_probe_read_user(out, n, (void *)addr);
		w->win_len = 0;
		if (len < 0)
			return -1;
		w->win_start = addr;
		w->win_len = len;
		off = 0;
	}
	i = (off / 8) & (ECPI_UNWIND_WINDOW / 8 - 1); /* < win_len / 8 already; the mask is for the verifier */
	out[0] = win->words[i];
	if (n == 16)
		out[1] = win->words[i + 1];
	return 0;
}

/* Two adjacent stack words at `addr` (a saved rbp below its return address). */
static __always_inline long read_pair(struct walk_state *w, __u64 addr, __u64 *low, __u64 *high)
{
	__u64 pair[2];

	if (stack_read(w, addr, pair, sizeof(pair)))
		return -1;
	*low = pair[0];
	*high = pair[1];
	return 0;
}

/* Through the kernel's signal frame: the interrupted pc, sp and rbp from
 * the ucontext at sp. The interrupted sp need not be above (sigaltstack);
 * the frame limit bounds the walk. */
static __always_inline long signal_step(struct walk_state *w)
{
	__u64 pc, sp, bp;

	if (stack_read(w, w->sp + ECPI_SIGFRAME_RIP, &pc, sizeof(pc)) ||
	    stack_read(w, w->sp + ECPI_SIGFRAME_RSP, &sp, sizeof(sp)) ||
	    stack_read(w, w->sp + ECPI_SIGFRAME_RBP, &bp, sizeof(bp)) || pc == 0) {
		w->end = ECPI_COUNTER_CUT_UNREADABLE;
		return 1;
	}
	w->pc = pc;
	w->sp = sp;
	w->bp = bp;
	w->exact = 1;
	return 0;
}

/* Frame d of this walk into the buffer that is not the memo (the next memo
 * if the walk reaches the thread root): its state, and where its caller's
 * rbp was read (bp_at, in words from the caller's sp; 0: carried). */
static __always_inline void memo_keep(struct walk_state *w, __u32 d, __s64 bp_at)
{
	struct stack_memo *m = w->memo;
	struct memo_frame *f;

	if (!m || !m->keep)
		return;
	f = &m->buf[(m->cur & 1) ^ 1][d & (ECPI_MAX_USER_STACK_DEPTH - 1)];
	f->pc = w->pc;
	f->sp = w->sp;
	f->bp = w->bp;
	f->bp_at = bp_at;
}

/* Whether frame d (a return address, d >= 1) is the memo's frame w->at:
 * the same pc, sp and bp. The memo's frames are sorted by sp, as this
 * walk's are, so the cursor only moves up (a few frames a step: a cursor
 * left behind costs a join, never a wrong frame). */
static __always_inline bool memo_join(struct walk_state *w, __u32 d)
{
	struct stack_memo *m = w->memo;
	struct memo_frame *f = 0;
	__u32 cur, at = 0;

	if (!m || d == 0 || w->exact)
		return false;
	cur = m->cur & 1;
	for (int k = 0; k < 4; k++) {
		at = m->at;
		if (at >= m->old_frames)
			return false;
		f = &m->buf[cur][at & (ECPI_MAX_USER_STACK_DEPTH - 1)];
		if (f->sp >= w->sp)
			break;
		m->at = at + 1;
	}
	return f && at != 0 && f->sp == w->sp && f->pc == w->pc && f->bp == w->bp;
}

/* Frame d is the memo's frame w->at: its caller from the memo where the
 * stack still holds the words the memo's walk read for it (the return
 * address at the caller's sp - 8, the caller's rbp where it was restored;
 * the rows are the same: same pc, same process entry). 1: the thread root,
 * the walk ends; 0: moved to the caller; -1: the stack no longer holds, walk
 * this frame by its row. */
static __always_inline int memo_replay(struct walk_state *w, __u32 d)
{
	struct stack_memo *m = w->memo;
	struct memo_frame *f, *next;
	__u32 cur, at;
	__u64 ra, bp;

	if (!m)
		return -1;
	at = m->at;
	m->replay = 0;
	if (at >= m->old_frames)
		return -1;
	cur = m->cur & 1;
	f = &m->buf[cur][at & (ECPI_MAX_USER_STACK_DEPTH - 1)];
	if (at + 1 == m->old_frames) {
		memo_keep(w, d, 0);
		w->end = ECPI_COUNTER_STACK_ROOT;
		return 1;
	}
	next = &m->buf[cur][(at + 1) & (ECPI_MAX_USER_STACK_DEPTH - 1)];
	if (stack_read(w, next->sp - 8, &ra, sizeof(ra)) || ra != next->pc)
		return -1;
	if (f->bp_at && (stack_read(w, next->sp + 8 * f->bp_at, &bp, sizeof(bp)) || bp != next->bp))
		return -1;
	memo_keep(w, d, f->bp_at);
	w->pc = next->pc;
	w->sp = next->sp;
	w->bp = next->bp;
	m->at = at + 1;
	m->replay = 1;
	m->replayed += 1;
	return 0;
}

/* One frame: records w->pc, then moves to the caller by the pc's CFI row,
 * or by the frame pointer where there is no usable row. */
static long walk_step(__u64 index, void *arg)
{
	struct walk_state *w = arg;
	struct ecpi_stack_record *rec = w->rec;
	struct ecpi_unwind_row row = {};
	__u32 d, base = w->base, why;
	__u64 cfa, ra, bp = w->bp;

	/* The frame's depth is the loop's index (one frame a step), which the
	 * verifier sees as an unknown number: a counter in the walk's state
	 * would be a constant each step, verified once per depth. */
	if (!rec || index >= ECPI_MAX_USER_STACK_DEPTH || base > ECPI_MAX_STACK_DEPTH) {
		w->end = ECPI_COUNTER_CUT_DEPTH;
		return 1;
	}
	d = index;
	rec->ips[base + d] = w->pc;
	if ((w->memo && w->memo->replay) || memo_join(w, d)) {
		long r = memo_replay(w, d);

		if (r >= 0)
			return r;
	}
	why = row_for(w, d, &row);
	if (why == 0 && row.kind == ECPI_UNWIND_END) {
		memo_keep(w, d, 0);
		w->end = ECPI_COUNTER_STACK_ROOT;
		return 1;
	}
	if (why == 0 && row.kind == ECPI_UNWIND_SIGNAL) {
		if (w->memo)
			w->memo->keep = 0; /* a walk through a signal frame is not kept */
		return signal_step(w);
	}
	w->exact = 0;
	if (why == 0) {
		if (row.kind == ECPI_UNWIND_CFA_RSP)
			cfa = w->sp + 8 * (__u64)row.cfa_offset8;
		else if (row.kind == ECPI_UNWIND_CFA_RBP)
			cfa = w->bp + 8 * (__u64)row.cfa_offset8;
		else /* PLT */
			cfa = w->sp + 8 + ((w->pc & 15) >= row.cfa_offset8 ? 8 : 0);
		if (row.rbp_offset8 == -2 ? read_pair(w, cfa - 16, &bp, &ra) /* push rbp right after the call */
					  : stack_read(w, cfa - 8, &ra, sizeof(ra)) ||
					    (row.rbp_offset8 &&
					     stack_read(w, cfa + 8 * (__s64)row.rbp_offset8, &bp, sizeof(bp)))) {
			w->end = ECPI_COUNTER_CUT_UNREADABLE;
			return 1;
		}
	} else {
		/* Frame-pointer fallback: rbp -> (saved rbp, return address). */
		if (w->bp == 0 || w->bp < w->sp || read_pair(w, w->bp, &bp, &ra)) {
			w->end = why;
			return 1;
		}
		cfa = w->bp + 16;
	}
	if (cfa <= w->sp) { /* a frame must move up the stack */
		w->end = ECPI_COUNTER_CUT_UNREADABLE;
		return 1;
	}
	if (ra == 0) { /* no caller, yet CFI did not mark the outermost frame */
		w->end = why ? why : ECPI_COUNTER_CUT_NO_ROW;
		return 1;
	}
	/* where the caller's rbp came from: the pair below the return address, a saved slot, or unchanged */
	memo_keep(w, d, why || row.rbp_offset8 == -2 ? -2 : row.rbp_offset8);
	w->pc = ra;
	w->sp = cfa;
	w->bp = bp;
	return 0;
}

/* The user registers at the sample: the context's in user mode, the task's
 * saved ones in kernel mode (none for kernel threads). */
static __always_inline bool user_registers(struct bpf_perf_event_data *ctx, bool kernel, struct walk_state *w)
{
	struct task_struct *task;
	struct pt_regs *regs;

	if (!kernel) {
		w->pc = ECPI_REG(ctx, ip);
		w->sp = ECPI_REG(ctx, sp);
		w->bp = ECPI_REG(ctx, bp);
		return true;
	}
	task = bpf_get_current_task_btf();
	if (!task->mm)
		return false;
	regs = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!regs || (regs->cs & 3) != 3)
		return false;
	w->pc = regs->ip;
	w->sp = regs->sp;
	w->bp = regs->bp;
	return true;
}

/* Bytes of user stack to copy from sp: ECPI_STACK_COPY_BYTES, less where the
 * main thread's stack ends sooner (its environment strings sit at its top). */
static __always_inline __u32 stack_copy_size(__u64 sp)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 top = 0;

	if (task->mm)
		top = BPF_CORE_READ(task, mm, env_end);
	if (top > sp && top - sp < ECPI_STACK_COPY_BYTES)
		return top - sp;
	return ECPI_STACK_COPY_BYTES;
}

/* The sample's process has no tables in the kernel yet (its first
 * milliseconds): its registers and a bounded copy of its stack go to user
 * space, which walks them with the same tables once they load. True when
 * sent; false (ring half full, stack unreadable) leaves the walk to frame
 * pointers, counted as no_table. */
static __always_inline bool send_stack_copy(const struct ecpi_sample_key *key, const struct ecpi_stack_record *walked,
					    const struct walk_state *w)
{
	struct ecpi_stack_copy_record *rec;
	__u32 zero = 0, size, header;

	if (bpf_ringbuf_query(&samples_rb, BPF_RB_AVAIL_DATA) > bpf_ringbuf_query(&samples_rb, BPF_RB_RING_SIZE) / 2)
		return false;
	rec = bpf_map_lookup_elem(&stack_copy_scratch, &zero);
	if (!rec)
		return false;
	size = stack_copy_size(w->sp);
	if (size > ECPI_STACK_COPY_BYTES)
		return false;
	/* Near the top of a thread's stack the whole copy may cross its end: try less. */
	if (bpf_probe_read_user(rec->stack, size, (void *)w->sp)) {
		size = size > 2048 ? 2048 : size;
		if (bpf_probe_read_user(rec->stack, size, (void *)w->sp))
			return false;
	}
	rec->kind = ECPI_RECORD_STACK_COPY;
	rec->kernel_depth = walked->kernel_depth;
	rec->stack_bytes = size;
	rec->key = *key;
	rec->time_ns = walked->time_ns;
	rec->pc = w->pc;
	rec->sp = w->sp;
	rec->bp = w->bp;
	__builtin_memcpy(rec->kernel_ips, walked->ips, sizeof(rec->kernel_ips));
	header = sizeof(*rec) - ECPI_STACK_COPY_BYTES;
	return bpf_ringbuf_output(&samples_rb, rec, header + size, BPF_RB_NO_WAKEUP) == 0;
}

/* Whether this sample is the one in registers_every that keeps its registers. */
static __always_inline bool registers_turn(void)
{
	__u32 zero = 0, *tick;

	if (registers_every == 1)
		return true;
	tick = bpf_map_lookup_elem(&register_ticks, &zero);
	if (!tick)
		return false;
	if (++*tick < registers_every)
		return false;
	*tick = 0;
	return true;
}

/* A register record of the sample (kind: ECPI_RECORD_REGISTERS alone, or
 * ECPI_RECORD_STACK_REGISTERS at the head of its stack's record). */
static __always_inline void fill_registers(struct ecpi_register_record *rec, struct bpf_perf_event_data *ctx,
					   const struct ecpi_sample_key *key, __u64 pid_tgid, __u64 now, __u32 kind)
{
	rec->kind = kind;
	rec->event = key->event;
	rec->flags = (__u16)((ECPI_REG(ctx, flags) & ECPI_FLAGS_STATUS_MASK) | ECPI_FLAGS_RECORDED);
	rec->tgid = key->tgid;
	rec->tid = (__u32)pid_tgid;
	rec->time_ns = now;
	rec->pc = key->pc;
	/* Hardware encoding order (ecpi_abi.h). */
	rec->regs[0] = ECPI_REG(ctx, ax);
	rec->regs[1] = ECPI_REG(ctx, cx);
	rec->regs[2] = ECPI_REG(ctx, dx);
	rec->regs[3] = ECPI_REG(ctx, bx);
	rec->regs[4] = ECPI_REG(ctx, sp);
	rec->regs[5] = ECPI_REG(ctx, bp);
	rec->regs[6] = ECPI_REG(ctx, si);
	rec->regs[7] = ECPI_REG(ctx, di);
	rec->regs[8] = ECPI_REG(ctx, r8);
	rec->regs[9] = ECPI_REG(ctx, r9);
	rec->regs[10] = ECPI_REG(ctx, r10);
	rec->regs[11] = ECPI_REG(ctx, r11);
	rec->regs[12] = ECPI_REG(ctx, r12);
	rec->regs[13] = ECPI_REG(ctx, r13);
	rec->regs[14] = ECPI_REG(ctx, r14);
	rec->regs[15] = ECPI_REG(ctx, r15);
}

/* --registers without -g's CFI walk: the snapshot has a ring of its own. */
static __always_inline void record_registers(struct bpf_perf_event_data *ctx, const struct ecpi_sample_key *key,
					     __u64 pid_tgid, __u64 now)
{
	struct ecpi_register_record *rec;

	if (!registers_turn())
		return;
	rec = bpf_ringbuf_reserve(&registers_rb, sizeof(*rec), 0);
	if (!rec) {
		count(key->event, ECPI_COUNTER_REGISTERS_LOST);
		return;
	}
	fill_registers(rec, ctx, key, pid_tgid, now, ECPI_RECORD_REGISTERS);
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
}

/* The walked sample to the ring: its stack record alone, or, when it keeps
 * its registers, with them ahead of it (one record, ECPI_RECORD_STACK_REGISTERS).
 * Only the frames written go (ECPI_RECORD_STACK_PACKED). The registers are
 * taken here, after the walk, so that the verifier walks the loop once, not
 * once per answer of registers_turn (it stops at 1M instructions). */
static __always_inline void send_walked(struct bpf_perf_event_data *ctx, struct ecpi_register_stack_record *both,
					const struct ecpi_sample_key *key, __u64 pid_tgid, __u64 now)
{
	bool regs = registers_every && !key->kernel && registers_turn();
	struct ecpi_stack_record *rec = &both->stack;
	__u32 frames = (__u32)rec->kernel_depth + rec->user_depth;
	__u32 size;

	if (frames > ECPI_MAX_STACK_DEPTH + ECPI_MAX_USER_STACK_DEPTH)
		frames = ECPI_MAX_STACK_DEPTH + ECPI_MAX_USER_STACK_DEPTH;
	size = __builtin_offsetof(struct ecpi_stack_record, ips) + 8 * frames;
	if (!regs) {
		if (bpf_ringbuf_output(&samples_rb, rec, size, BPF_RB_NO_WAKEUP))
			count(key->event, ECPI_COUNTER_RINGBUF_LOST);
		return;
	}
	fill_registers(&both->regs, ctx, key, pid_tgid, now, ECPI_RECORD_STACK_REGISTERS);
	if (bpf_ringbuf_output(&samples_rb, both, sizeof(both->regs) + size, BPF_RB_NO_WAKEUP)) {
		count(key->event, ECPI_COUNTER_RINGBUF_LOST);
		count(key->event, ECPI_COUNTER_REGISTERS_LOST);
	}
}

/* The memo this walk may join: the last whole walk on this CPU, if it was
 * of the same process entry (the same rows). */
static __always_inline void memo_start(struct walk_state *w, __u32 tgid)
{
	__u32 zero = 0;
	struct stack_memo *m;

	if (!w->proc || !w->proc->generation)
		return;
	m = bpf_map_lookup_elem(&unwind_memo, &zero);
	if (!m)
		return;
	w->memo = m;
	m->keep = 1;
	m->at = 0;
	m->replay = 0;
	m->replayed = 0;
	m->old_frames = 0;
	if (m->generation == w->proc->generation && m->tgid == tgid)
		m->old_frames = m->frames > ECPI_MAX_USER_STACK_DEPTH ? ECPI_MAX_USER_STACK_DEPTH : m->frames;
}

/* A walk that reached the thread root becomes the memo; counts the frames replayed. */
static __always_inline void memo_end(struct walk_state *w, __u32 tgid)
{
	struct stack_memo *m = w->memo;
	__u32 zero = 0, one = 1;
	__u64 *n;

	if (!m)
		return;
	if (m->keep && w->end == ECPI_COUNTER_STACK_ROOT && w->proc) {
		m->cur = (m->cur & 1) ^ 1;
		m->frames = w->depth;
		m->tgid = tgid;
		m->generation = w->proc->generation;
	}
	if (!m->replayed)
		return;
	n = bpf_map_lookup_elem(&memo_stats, &zero);
	if (n)
		*n += 1;
	n = bpf_map_lookup_elem(&memo_stats, &one);
	if (n)
		*n += m->replayed;
}

/* With --registers, the sample's registers travel in its stack's record. */
static __always_inline int record_stack_cfi(struct bpf_perf_event_data *ctx, const struct ecpi_sample_key *key,
					    __u64 pid_tgid, __u64 now)
{
	struct ecpi_register_stack_record *both;
	struct walk_state w = {};
	struct ecpi_stack_record *rec;
	__u32 zero = 0;
	long frames;
	__u64 sp;

	both = bpf_map_lookup_elem(&stack_scratch, &zero);
	if (!both)
		return 0;
	rec = &both->stack;
	start_stack_record(ctx, key, rec, ECPI_RECORD_STACK_PACKED, now);
	if (user_registers(ctx, key->kernel, &w)) {
		w.proc = bpf_map_lookup_elem(&unwind_processes, &key->tgid);
		if (!w.proc && send_stack_copy(key, rec, &w)) {
			if (registers_every && !key->kernel)
				record_registers(ctx, key, pid_tgid, now);
			return 0;
		}
		w.rec = rec;
		w.win = bpf_map_lookup_elem(&unwind_window, &zero);
		w.base = rec->kernel_depth;
		sp = w.sp;
		if (w.win)
			w.want = sp + w.win->extent;
		memo_start(&w, key->tgid);
		/* One frame a step: the frames are the steps taken. */
		frames = bpf_loop(ECPI_MAX_USER_STACK_DEPTH, walk_step, &w, 0);
		w.depth = frames > 0 && frames <= ECPI_MAX_USER_STACK_DEPTH && w.base <= ECPI_MAX_STACK_DEPTH ? frames : 0;
		rec->user_depth = w.depth;
		memo_end(&w, key->tgid);
		/* The last frame's sp: the walk read below it (its return address at
		 * sp - 8). A signal frame's walk may move to another stack: no extent then. */
		if (w.win)
			w.win->extent = w.sp > sp && w.sp - sp <= ECPI_UNWIND_WINDOW ? w.sp - sp : 0;
		count(key->event, w.end ? w.end : ECPI_COUNTER_CUT_DEPTH);
	}
	send_walked(ctx, both, key, pid_tgid, now);
	return 0;
}

#ifdef ECPI_TEST_HOOKS
static long spin_until(__u64 index, void *end)
{
	return bpf_ktime_get_ns() >= *(__u64 *)end;
}
#endif

SEC("perf_event")
int ecpi_sample(struct bpf_perf_event_data *ctx)
{
	struct ecpi_sample_key key;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	__u64 *idle, now;

#ifdef ECPI_TEST_HOOKS
	if (test_sample_cost_ns) {
		__u64 end = bpf_ktime_get_ns() + test_sample_cost_ns;

		bpf_loop(1 << 23, spin_until, &end, 0);
	}
#endif
	if (filter_tgids && !bpf_map_lookup_elem(&tracked_tgids, &tgid))
		return 0;
	/* the budget's calibration runs in the daemon: it pays the full handler */
	if (exclude_tgid && tgid == exclude_tgid && bpf_get_attach_cookie(ctx) != ECPI_CALIBRATION_EVENT)
		return 0;

	key.tgid = tgid;
	key.event = (__u16)bpf_get_attach_cookie(ctx);
	key.kernel = (ECPI_REG(ctx, cs) & 3) != 3;
	key.pad = 0;
	key.pc = ECPI_REG(ctx, ip);
	if (key.event >= ECPI_MAX_EVENTS)
		return 0;
	if (tgid == 0) {
		__u32 event = key.event;

		idle = bpf_map_lookup_elem(&idle_samples, &event);
		if (idle)
			*idle += 1; /* per-CPU: no atomics needed */
		return 0;
	}
	count(key.event, ECPI_COUNTER_SAMPLES);
	/* One clock read for the sample's records: user space names their pcs
	 * with the mappings of that time (a mapping replaced later, issue 29). */
	now = registers_every || capture_stacks ? bpf_ktime_get_ns() : 0;
	if (capture_stacks && unwind_cfi)
		return record_stack_cfi(ctx, &key, pid_tgid, now);
	if (registers_every && !key.kernel)
		record_registers(ctx, &key, pid_tgid, now);
	if (capture_stacks)
		return record_stack(ctx, &key, now);
	if (active_slot)
		return aggregate(&counts_1, &key);
	return aggregate(&counts_0, &key);
}

/* Children of tracked processes are tracked from their first instruction
 * (`record -- cmd` and `-p` follow every process the target starts). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(ecpi_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 parent_tgid, child_tgid;
	__u8 yes = 1;

	if (!filter_tgids)
		return 0;
	parent_tgid = BPF_CORE_READ(parent, tgid);
	child_tgid = BPF_CORE_READ(child, tgid);
	if (parent_tgid == child_tgid)
		return 0; /* a new thread */
	if (bpf_map_lookup_elem(&tracked_tgids, &parent_tgid))
		bpf_map_update_elem(&tracked_tgids, &child_tgid, &yes, BPF_ANY);
	return 0;
}

/* Issue 34 defect 2: the command line of a process that runs for less than
 * a drain is gone from /proc when user space looks, so it is read here, at
 * exec, from the new stack where exec copied the strings (mm->arg_start ..
 * arg_end, present: exec wrote them). Only tracked processes when filtering. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(ecpi_exec, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	struct ecpi_exec_record *rec;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, zero = 0;
	__u64 start, end, len;

	if (filter_tgids && !bpf_map_lookup_elem(&tracked_tgids, &tgid))
		return 0;
	rec = bpf_map_lookup_elem(&exec_scratch, &zero);
	if (!rec)
		return 0;
	start = BPF_CORE_READ(task, mm, arg_start);
	end = BPF_CORE_READ(task, mm, arg_end);
	len = end > start ? end - start : 0;
	rec->kind = ECPI_RECORD_EXEC_ARGS;
	rec->tgid = tgid;
	rec->truncated = len > ECPI_EXEC_ARGS_BYTES;
	if (len > ECPI_EXEC_ARGS_BYTES)
		len = ECPI_EXEC_ARGS_BYTES;
	len &= (2 * ECPI_EXEC_ARGS_BYTES - 1); /* for the verifier: len <= ECPI_EXEC_ARGS_BYTES */
	if (len > ECPI_EXEC_ARGS_BYTES || bpf_probe_read_user(rec->args, len, (const void *)start) != 0)
		len = 0;
	rec->args_bytes = len;
	if (bpf_ringbuf_output(&exec_rb, rec, __builtin_offsetof(struct ecpi_exec_record, args) + len, 0) != 0)
		__sync_fetch_and_add(&exec_args_lost, 1);
	return 0;
}
