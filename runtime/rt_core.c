/* ecpi runtime core: the control handshake, per-thread rings and the slow
 * path of the sampling core (ecpi_rt_abi.h describes the protocol,
 * ecpi_rt_sampling.h the windows). Depends on nothing of ecpi and on no
 * C++ library: it is linked into the user's program. */
#define _GNU_SOURCE
#include "rt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

__thread struct ecpi_rt_thread ecpi_rt_tls __attribute__((tls_model("initial-exec"))) = {
	/* the first event of every thread asks the slow path what to do */
	.sampler = {.countdown = 1},
	.path_sampler = {.countdown = 1},
	.log_armed = 1,
	.set_bitmap = 0, /* no set sampling until the thread claims a ring */
};

struct ecpi_rt_header *ecpi_rt_header_ptr;
volatile uint32_t ecpi_rt_features; /* enabled features; 0 when no ecpi run controls us */
static pthread_key_t thread_end_key;
static int controller_pid;

static void report_runtime_error(struct ecpi_rt_header *h, const char *what)
{
	if (h)
		snprintf(h->runtime_error, sizeof h->runtime_error, "%s", what);
	/* One line on stderr: the program's output is its own, but an ecpi run
	 * that silently did nothing would be worse. */
	dprintf(2, "ecpi runtime: %s\n", what);
}

static int module_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	struct ecpi_rt_header *h = data;
	if (h->module_count >= ECPI_RT_MAX_MODULES)
		return 1;
	struct ecpi_rt_module *m = &h->modules[h->module_count];
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type != PT_LOAD)
			continue;
		uint64_t s = info->dlpi_addr + p->p_vaddr;
		if (s < lo)
			lo = s;
		if (s + p->p_memsz > hi)
			hi = s + p->p_memsz;
	}
	if (hi == 0)
		return 0;
	m->base = info->dlpi_addr;
	m->start = lo;
	m->end = hi;
	const char *name = info->dlpi_name;
	if (h->module_count == 0 && (!name || !name[0])) {
		ssize_t n = readlink("/proc/self/exe", m->path, sizeof m->path - 1);
		m->path[n > 0 ? n : 0] = 0;
	} else {
		snprintf(m->path, sizeof m->path, "%s", name ? name : "");
	}
	h->module_count++;
	return 0;
}

static void close_thread_ring(void *unused);

static void fork_child(void)
{
	/* The child must not write into its parent's rings. */
	ecpi_rt_features = 0;
	ecpi_rt_tls.ring = 0;
	ecpi_rt_tls.state = ECPI_RT_THREAD_OFF;
	ecpi_rt_tls.sampler.countdown = ECPI_RT_COUNTDOWN_NEVER;
	ecpi_rt_tls.path_sampler.countdown = ECPI_RT_COUNTDOWN_NEVER;
	ecpi_rt_tls.set_bitmap = ecpi_rt_tls.set_base = 0;
	ecpi_rt_tls.set_hit_mask = 0;
	ecpi_rt_tls.span_open = 0;
}

static uint64_t measure_block_cost(void);

__attribute__((constructor(101))) static void ecpi_rt_init(void)
{
	const char *env = getenv(ECPI_RT_CONTROL_ENV);
	if (!env)
		return;
	char *end = 0;
	long fd = strtol(env, &end, 10);
	unsetenv(ECPI_RT_CONTROL_ENV); /* children and exec'd programs are not controlled */
	if (!end || *end || fd < 0) {
		report_runtime_error(0, "ECPI_RT_CONTROL is not a file descriptor number; running uncontrolled");
		return;
	}
	struct stat st;
	if (fstat((int)fd, &st) != 0 || (uint64_t)st.st_size < sizeof(struct ecpi_rt_header)) {
		report_runtime_error(0, "ECPI_RT_CONTROL names no control region (was the program started by ecpi?); running uncontrolled");
		return;
	}
	void *map = mmap(0, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
	close((int)fd);
	if (map == MAP_FAILED) {
		report_runtime_error(0, "cannot map the control region; running uncontrolled");
		return;
	}
	struct ecpi_rt_header *h = map;
	if (h->magic != ECPI_RT_MAGIC || h->abi_version != ECPI_RT_ABI_VERSION ||
	    h->header_size != sizeof(struct ecpi_rt_header) || h->region_size != (uint64_t)st.st_size ||
	    h->ring_records == 0 || (h->ring_records & (h->ring_records - 1)) != 0 ||
	    ECPI_RT_RING_OFFSET(h->ring_count, h->ring_records) > h->region_size) {
		report_runtime_error(h, "the control region's ABI differs from this runtime's (rebuild the program against this ecpi's runtime); running uncontrolled");
		munmap(map, (size_t)st.st_size);
		return;
	}
	h->runtime_pid = (uint32_t)getpid();
	controller_pid = getppid();
	/* What libc allocates for us from here on comes from the runtime's
	 * own heap, not the program's (rt_malloc.c). */
	ecpi_rt_private_heap_init();
	ecpi_rt_tls.in_runtime = 1;
	h->module_count = 0;
	dl_iterate_phdr(module_cb, h);
	pthread_key_create(&thread_end_key, close_thread_ring);
	pthread_atfork(0, 0, fork_child);
	ecpi_rt_tls.in_runtime = 0;
	ecpi_rt_header_ptr = h;
	if (h->features_requested & ECPI_RT_FEATURE_PATHS)
		h->block_cost_ticks = measure_block_cost();
	h->features_active = h->features_requested & (ECPI_RT_FEATURE_MEMTRACE | ECPI_RT_FEATURE_PATHS);
	__atomic_store_n(&ecpi_rt_features, h->features_active, __ATOMIC_RELEASE);
}

__attribute__((destructor(101))) static void ecpi_rt_fini(void)
{
	close_thread_ring(0);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void publish(struct ecpi_rt_thread *t)
{
	ecpi_rt_publish(t);
}

/* Waits for room for n records. Returns 0 when the consumer is gone (the
 * records are then dropped and counted). */
static int wait_for_room(struct ecpi_rt_thread *t, uint32_t n)
{
	struct ecpi_rt_ring *r = t->ring;
	uint64_t cap = t->mask + 1ull;
	uint64_t started = 0;
	unsigned spins = 0;
	publish(t); /* the consumer frees only what it can see */
	for (;;) {
		t->cached_tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		if (t->head + n - t->cached_tail <= cap)
			break;
		struct ecpi_rt_header *h = ecpi_rt_header_ptr;
		if (__atomic_load_n(&h->consumer_gone, __ATOMIC_ACQUIRE))
			return 0;
		uint64_t now = now_ns();
		if (!started)
			started = now;
		/* The controlling ecpi died without saying so: stop waiting. */
		if (now - started > 1000000000ull && kill(controller_pid, 0) != 0 && errno == ESRCH) {
			__atomic_store_n(&h->consumer_gone, 1, __ATOMIC_RELEASE);
			return 0;
		}
		/* A few yields, then sleeps of 20 us: a program that waits
		 * for a cache simulation yielded on its CPU for as long as
		 * ecpi simulated (15-20% of a run's CPU time where ecpi is the
		 * slower side, docs/CACHESIM.md). The ring holds milliseconds
		 * of ecpi's work when full, so the later wake-up costs ecpi no
		 * records to read. A paths recording keeps yielding: its
		 * program's own time is what it measures. */
		if (++spins < 16 || (ecpi_rt_features & ECPI_RT_FEATURE_PATHS)) {
			sched_yield();
		} else {
			struct timespec pause = {0, 20000};
			nanosleep(&pause, NULL);
		}
	}
	if (started)
		__atomic_fetch_add(&ecpi_rt_header_ptr->stall_ns, now_ns() - started, __ATOMIC_RELAXED);
	return 1;
}

/* Appends n (1 or 2) records; publishes them when they complete a batch. */
static void push(struct ecpi_rt_thread *t, uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1, uint32_t n)
{
	if (t->head + n - t->cached_tail > t->mask + 1ull && !wait_for_room(t, n)) {
		t->ring->dropped += n;
		return;
	}
	struct ecpi_rt_record *rec = t->records;
	rec[t->head & t->mask] = (struct ecpi_rt_record){a0, a1};
	if (n == 2)
		rec[(t->head + 1) & t->mask] = (struct ecpi_rt_record){b0, b1};
	t->head += n;
	if ((t->head - n) / ECPI_RT_PUBLISH_EVERY != t->head / ECPI_RT_PUBLISH_EVERY)
		publish(t);
}

static uint64_t kind(enum ecpi_rt_record_kind k)
{
	return (uint64_t)k << ECPI_RT_KIND_SHIFT;
}

/* Copies the staged records of a burst into the ring and publishes them.
 * In the middle of a burst (`mid_burst`) the copy falls inside the time of
 * the path the last block entry belongs to: a PAUSE record after them says
 * how long it took, so the analysis takes it out again. */
void ecpi_rt_stage_flush(struct ecpi_rt_thread *t, int mid_burst)
{
	uint64_t started = ecpi_rt_rdtsc();
	uint32_t n = t->staged;
	t->staged = 0;
	if (n && t->head + n - t->cached_tail > t->mask + 1ull && !wait_for_room(t, n)) {
		t->ring->dropped += n;
	} else {
		for (uint32_t i = 0; i < n; i++)
			t->records[(t->head + i) & t->mask] = t->stage[i];
		t->head += n;
		publish(t);
	}
	if (!mid_burst)
		return;
	uint64_t paused = ecpi_rt_rdtsc() - started;
	t->paused_ticks += paused;
	t->stage[t->staged++] = (struct ecpi_rt_record){kind(ECPI_RT_REC_PAUSE), paused};
}

int ecpi_rt_ring_reserve(struct ecpi_rt_thread *t, uint32_t n)
{
	if (t->staged)
		ecpi_rt_stage_flush(t, 0); /* in order */
	if (t->head + n - t->cached_tail <= t->mask + 1ull || wait_for_room(t, n))
		return 1;
	t->ring->dropped += n;
	return 0;
}

/* Published once ECPI_RT_SPAN_PUBLISH_EVERY records have gone in since the
 * last time, not at every span (whose records are about as many as a
 * batch of ECPI_RT_PUBLISH_EVERY): each store to `head` is a coherence
 * miss while ecpi keeps reading it. The rest goes out with the next burst,
 * a wait for room or the thread's end; a program that dies without running
 * its destructors (SIGKILL, _exit) loses up to that many records of spans. */
void ecpi_rt_ring_commit(struct ecpi_rt_thread *t, uint32_t n)
{
	t->head += n;
	if ((t->head - n) / ECPI_RT_SPAN_PUBLISH_EVERY != t->head / ECPI_RT_SPAN_PUBLISH_EVERY)
		publish(t);
}

/* Stages one record of a burst; copies the stage out when it is full
 * (keeping room for a PAUSE, a WINDOW and a BLOCK record). */
void ecpi_rt_stage_push(struct ecpi_rt_thread *t, uint64_t w0, uint64_t w1)
{
	t->stage[t->staged++] = (struct ecpi_rt_record){w0, w1};
	if (t->staged > ECPI_RT_STAGE_RECORDS - 3)
		ecpi_rt_stage_flush(t, t->path_sampler.on_left != 0);
}

static void thread_stack(uint64_t *lo, uint64_t *hi)
{
	pthread_attr_t attr;
	void *addr = 0;
	size_t size = 0;
	*lo = *hi = 0;
	if (pthread_getattr_np(pthread_self(), &attr) != 0)
		return;
	if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
		*lo = (uint64_t)(uintptr_t)addr;
		*hi = *lo + size;
	}
	pthread_attr_destroy(&attr);
}

static void thread_off(struct ecpi_rt_thread *t)
{
	t->state = ECPI_RT_THREAD_OFF;
	t->sampler.countdown = ECPI_RT_COUNTDOWN_NEVER;
	t->path_sampler.countdown = ECPI_RT_COUNTDOWN_NEVER;
	t->set_bitmap = t->set_base = 0;
	t->set_hit_mask = 0;
	t->span_open = 0;
}

/* Writes every page of a ring once, before its first burst: the first
 * write to a page inside a burst would land in the time of a path. In a VM
 * that write costs 8-10 us even after MADV_POPULATE_WRITE (measured on
 * this project's KVM guest: populated shared pages take the same stall on
 * their first write; written pages do not), so the pages are written. */
static void prefault_ring(struct ecpi_rt_ring *r, uint32_t records)
{
	volatile char *bytes = (volatile char *)(r + 1);
	uint64_t size = (uint64_t)records * sizeof(struct ecpi_rt_record);
	for (uint64_t off = 0; off < size; off += 4096)
		bytes[off] = 0;
}

/* Claims a ring for the calling thread and announces it. Returns 0 (and
 * turns the thread off) when none is left. */
static int claim_ring(struct ecpi_rt_thread *t)
{
	struct ecpi_rt_header *h = ecpi_rt_header_ptr;
	uint32_t i = __atomic_fetch_add(&h->rings_claimed, 1, __ATOMIC_ACQ_REL);
	if (i >= h->ring_count) {
		__atomic_fetch_add(&h->threads_without_ring, 1, __ATOMIC_RELAXED);
		thread_off(t);
		return 0;
	}
	struct ecpi_rt_ring *r = (struct ecpi_rt_ring *)((char *)h + ECPI_RT_RING_OFFSET(i, h->ring_records));
	uint32_t tid = (uint32_t)syscall(SYS_gettid);
	r->tid = tid;
	t->ring = r;
	t->records = (struct ecpi_rt_record *)(r + 1);
	t->mask = h->ring_records - 1;
	t->head = 0;
	t->cached_tail = 0;
	if (ecpi_rt_features & ECPI_RT_FEATURE_PATHS) {
		prefault_ring(r, h->ring_records);
		if (!t->stage) {
			void *stage = mmap(0, ECPI_RT_STAGE_RECORDS * sizeof(struct ecpi_rt_record), PROT_READ | PROT_WRITE,
			                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
			if (stage == MAP_FAILED) {
				report_runtime_error(h, "cannot map a thread's burst stage (out of memory?); the thread is not traced");
				thread_off(t);
				return 0;
			}
			t->stage = stage;
			/* written once, like the ring: a first write inside a burst stalls */
			memset(stage, 0, ECPI_RT_STAGE_RECORDS * sizeof(struct ecpi_rt_record));
		}
		t->staged = 0;
	}
	t->in_runtime = 1; /* pthread_getattr_np allocates: from the runtime's heap (rt_malloc.c) */
	uint64_t lo, hi;
	thread_stack(&lo, &hi);
	t->in_runtime = 0;
	__atomic_store_n(&r->state, ECPI_RT_RING_ACTIVE, __ATOMIC_RELEASE);
	push(t, kind(ECPI_RT_REC_THREAD) | tid, lo, kind(ECPI_RT_REC_THREAD_STACK_END), hi, 2);
	publish(t);
	uint64_t seed = h->seed ^ ((uint64_t)(i + 1) * 0x9E3779B97F4A7C15ULL);
	if (ecpi_rt_features & ECPI_RT_FEATURE_MEMTRACE) {
		ecpi_rt_sampler_init(&t->sampler, h->window, h->off_mean, seed);
		t->set_shift = h->set_shift & 63;
		t->set_bitmap = t->set_base = h->set_bitmap;
		t->set_rotate_step = h->set_rotate_step;
		t->set_rotate_windows = h->set_rotate_windows;
		t->set_rotate_warm = h->set_rotate_warm;
		/* (rotating sets: a group that takes its turn again holds what its last turn left) */
		t->set_hit_mask = h->set_bitmap && !h->set_rotate_windows ? h->set_hit_mask & 63 : 0;
		t->set_hits = 0;
		memset(t->set_last_line, 0, sizeof t->set_last_line);
	} else
		t->sampler.countdown = ECPI_RT_COUNTDOWN_NEVER;
	if (ecpi_rt_features & ECPI_RT_FEATURE_PATHS)
		ecpi_rt_sampler_init(&t->path_sampler, h->window, h->off_mean, seed ^ 0x5851F42D4C957F2DULL);
	else
		t->path_sampler.countdown = ECPI_RT_COUNTDOWN_NEVER;
	t->state = ECPI_RT_THREAD_ACTIVE;
	pthread_setspecific(thread_end_key, (void *)1);
	return 1;
}

/* Decides what a thread's first event (or an event after fork) means. */
static int ensure_thread(struct ecpi_rt_thread *t)
{
	if (t->state == ECPI_RT_THREAD_ACTIVE)
		return 1;
	if (t->state == ECPI_RT_THREAD_NEW && ecpi_rt_features)
		return claim_ring(t);
	thread_off(t);
	return 0;
}

static void close_thread_ring(void *unused)
{
	(void)unused;
	struct ecpi_rt_thread *t = &ecpi_rt_tls;
	if (t->state != ECPI_RT_THREAD_ACTIVE || !t->ring)
		return;
	if (t->staged)
		ecpi_rt_stage_flush(t, 0);
	if (t->stage) {
		munmap(t->stage, ECPI_RT_STAGE_RECORDS * sizeof(struct ecpi_rt_record));
		t->stage = 0;
	}
	if (t->set_hits) {
		push(t, kind(ECPI_RT_REC_SET_HITS), t->set_hits, 0, 0, 1);
		t->set_hits = 0;
	}
	push(t, kind(ECPI_RT_REC_END) | (t->head & ECPI_RT_PAYLOAD_MASK), ecpi_rt_sampler_skipped_now(&t->sampler), 0, 0, 1);
	publish(t);
	__atomic_store_n(&t->ring->state, ECPI_RT_RING_CLOSED, __ATOMIC_RELEASE);
	thread_off(t);
}

void ecpi_rt_memref_slow(uint64_t addr, unsigned size_log2, unsigned write, uint64_t pc)
{
	struct ecpi_rt_thread *t = &ecpi_rt_tls;
	if (ecpi_rt_memref_quick(t, ecpi_rt_memref_word(addr, size_log2, write), pc))
		return;
	if (t->in_runtime)
		return;
	if (t->state != ECPI_RT_THREAD_ACTIVE) {
		/* The thread's first event: claim a ring (which draws the first,
		 * random, gap), then count this event as the fast path would. */
		if (!ensure_thread(t) || --t->sampler.countdown != 0)
			return;
	} else if (t->sampler.countdown != 0) {
		/* Outside a window, a reference to a sampled set (MemSpy 7.3): the
		 * time sampler is untouched (this event is one it skips). */
		uint64_t w0 = ecpi_rt_memref_word(addr, size_log2, write);
		if (ecpi_rt_set_hit(t, w0))
			return;
		ecpi_rt_set_note(t, w0);
		push(t, ((uint64_t)ECPI_RT_REC_MEMREF_SET << ECPI_RT_KIND_SHIFT) | (w0 & ECPI_RT_PAYLOAD_MASK), pc, 0, 0, 1);
		return;
	}
	if (!(ecpi_rt_features & ECPI_RT_FEATURE_MEMTRACE)) {
		/* A thread claimed its ring for another feature before this
		 * callback's first event: references are not traced. */
		t->sampler.countdown = ECPI_RT_COUNTDOWN_NEVER;
		return;
	}
	if (ecpi_rt_sampler_step(&t->sampler)) {
		/* A window begins: the sampled sets take the turn of its period. */
		if (t->set_base)
			t->set_bitmap = ecpi_rt_set_bitmap_at(t->set_base, t->set_rotate_step, t->set_rotate_windows, t->set_rotate_warm,
			                                       t->sampler.windows - 1);
		push(t, kind(ECPI_RT_REC_WINDOW) | (t->sampler.windows - 1), t->sampler.gap, 0, 0, 1);
	}
	ecpi_rt_set_note(t, ecpi_rt_memref_word(addr, size_log2, write));
	push(t, ecpi_rt_memref_word(addr, size_log2, write), pc, 0, 0, 1);
	if (t->sampler.on_left == 0)
		publish(t); /* the window ended */
}

/* Heap records name the objects a cache simulation reports; a paths
 * recording has no use for them, and writing them would put a ring store
 * into the time of every path that allocates. */
void ecpi_rt_note_alloc(void *p, uint64_t size, enum ecpi_rt_allocator allocator, void *site)
{
	struct ecpi_rt_thread *t = &ecpi_rt_tls;
	if (!p || t->in_runtime || !(ecpi_rt_features & ECPI_RT_FEATURE_MEMTRACE) || !ensure_thread(t))
		return;
	push(t, kind(ECPI_RT_REC_ALLOC) | (size & ECPI_RT_PAYLOAD_MASK), (uint64_t)(uintptr_t)p,
	     kind(ECPI_RT_REC_ALLOC_SITE) | (uint64_t)allocator, (uint64_t)(uintptr_t)site, 2);
}

void ecpi_rt_note_free(void *p)
{
	struct ecpi_rt_thread *t = &ecpi_rt_tls;
	if (!p || t->in_runtime || !(ecpi_rt_features & ECPI_RT_FEATURE_MEMTRACE) || !ensure_thread(t))
		return;
	push(t, kind(ECPI_RT_REC_FREE), (uint64_t)(uintptr_t)p, 0, 0, 1);
}

/* The slow path of a block entry (rt_paths.c): the countdown of the
 * thread's path sampler reached zero. The clock is read first, so the
 * record's own cost falls after the stamp, inside the block. */
void ecpi_rt_block_slow(uint64_t pc)
{
	uint64_t tsc = ecpi_rt_rdtsc_fenced();
	struct ecpi_rt_thread *t = &ecpi_rt_tls;
	if (t->in_runtime) {
		t->path_sampler.countdown = 1; /* decide again on the next block */
		return;
	}
	if (t->state != ECPI_RT_THREAD_ACTIVE) {
		if (!ensure_thread(t) || --t->path_sampler.countdown != 0)
			return;
	}
	if (!(ecpi_rt_features & ECPI_RT_FEATURE_PATHS)) {
		t->path_sampler.countdown = ECPI_RT_COUNTDOWN_NEVER;
		return;
	}
	if (ecpi_rt_sampler_step(&t->path_sampler))
		ecpi_rt_stage_push(t, kind(ECPI_RT_REC_WINDOW) | (t->path_sampler.windows - 1), t->path_sampler.gap);
	ecpi_rt_stage_push(t, kind(ECPI_RT_REC_BLOCK) | (pc & ECPI_RT_PAYLOAD_MASK), tsc);
	if (t->path_sampler.on_left == 0)
		ecpi_rt_stage_flush(t, 0); /* the burst ended */
}

/* What one block entry inside a burst costs the program (the callback's
 * slow path, the clock read, the record), in TSC ticks: a loop of a few
 * dependent multiplications (a short block) calling the real callback once
 * per iteration, run with every call recorded and with none recorded (the
 * fast path), on a scratch ring that is never full; the difference per
 * call, from the cheapest of several batches each. Measured in the
 * constructor, before any thread is traced, with warm caches: the cost in
 * a program with colder caches is higher, so path times keep a little of
 * it. */
static uint64_t time_calibration_batch(void (*callback)(uint32_t *), int on)
{
	enum { kBatch = 512 };
	struct ecpi_rt_thread *t = &ecpi_rt_tls;
	static struct ecpi_rt_ring scratch_ring;
	static struct ecpi_rt_record scratch[kBatch * 2];
	static struct ecpi_rt_record scratch_stage[ECPI_RT_STAGE_RECORDS];
	uint32_t guard = 0;
	volatile uint64_t sink;
	uint64_t x = 1;
	t->ring = &scratch_ring;
	t->records = scratch;
	t->mask = kBatch * 2 - 1;
	t->head = t->cached_tail = scratch_ring.head = scratch_ring.tail = 0;
	t->stage = scratch_stage;
	t->staged = 0;
	t->paused_ticks = 0;
	ecpi_rt_sampler_init(&t->path_sampler, UINT64_MAX, 0, 1);
	if (!on)
		t->path_sampler.countdown = ECPI_RT_COUNTDOWN_NEVER;
	uint64_t start = ecpi_rt_rdtsc();
	for (int i = 0; i < kBatch; i++) {
		callback(&guard);
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		x ^= x >> 29;
	}
	/* Copying the stage out is the runtime's own time the analysis takes
	 * out by its PAUSE records, not part of an entry's cost. */
	uint64_t ticks = ecpi_rt_rdtsc() - start - t->paused_ticks;
	sink = x;
	(void)sink;
	return ticks / kBatch;
}

static uint64_t measure_block_cost(void)
{
	enum { kRounds = 24 };
	void (*volatile callback)(uint32_t *) = __sanitizer_cov_trace_pc_guard;
	struct ecpi_rt_thread saved = ecpi_rt_tls;
	uint32_t saved_features = ecpi_rt_features;
	uint64_t best_on = UINT64_MAX, best_off = UINT64_MAX;
	ecpi_rt_features = ECPI_RT_FEATURE_PATHS;
	ecpi_rt_tls.state = ECPI_RT_THREAD_ACTIVE;
	ecpi_rt_tls.in_runtime = 0;
	for (int r = 0; r < kRounds; r++) {
		uint64_t on = time_calibration_batch(callback, 1);
		uint64_t off = time_calibration_batch(callback, 0);
		if (on < best_on)
			best_on = on;
		if (off < best_off)
			best_off = off;
	}
	ecpi_rt_tls = saved;
	ecpi_rt_features = saved_features;
	return best_on > best_off ? best_on - best_off : 0;
}
