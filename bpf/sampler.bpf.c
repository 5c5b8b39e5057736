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

/* Set by the loader before load. */
const volatile bool filter_tgids = false;   /* only count tgids in tracked_tgids */
const volatile bool capture_stacks = false; /* -g: every sample goes to the ring buffer with stacks */
const volatile __u32 exclude_tgid = 0;      /* the daemon's own tgid with --exclude-self (0: none) */
/* --registers N: one user-mode sample in N (per CPU) keeps its registers;
 * 0: none, 1: every one. */
const volatile __u32 registers_every = 0;
#ifdef ECPI_TEST_HOOKS
/* Test builds only (bpf/CMakeLists.txt builds a second object): every sample
 * first spins this long, so a test can make sampling expensive and check that
 * the overhead budget's calibration lowers the rate (tests/bpf/budget_test.cpp). */
const volatile __u64 test_sample_cost_ns = 0;
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

static __always_inline int record_stack(struct bpf_perf_event_data *ctx, const struct ecpi_sample_key *key)
{
	struct ecpi_stack_record *rec;
	long n;

	rec = bpf_ringbuf_reserve(&samples_rb, sizeof(*rec), 0);
	if (!rec) {
		count(key->event, ECPI_COUNTER_RINGBUF_LOST);
		return 0;
	}
	rec->kind = ECPI_RECORD_STACK_SAMPLE;
	rec->key = *key;
	rec->kernel_depth = 0;
	rec->user_depth = 0;
	if (key->kernel) {
		n = bpf_get_stack(ctx, rec->ips, ECPI_MAX_STACK_DEPTH * sizeof(__u64), 0);
		if (n > 0)
			rec->kernel_depth = n / sizeof(__u64);
		else
			count(key->event, ECPI_COUNTER_STACK_ERRORS);
	}
	n = bpf_get_stack(ctx, &rec->ips[ECPI_MAX_STACK_DEPTH], ECPI_MAX_STACK_DEPTH * sizeof(__u64),
			  BPF_F_USER_STACK);
	if (n > 0)
		rec->user_depth = n / sizeof(__u64);
	/* n == 0 or an error for kernel threads and idle: no user stack. */
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
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

/* The context only allows full-width loads of the registers. */
#define ECPI_REG(ctx, name) (*(volatile __u64 *)&(ctx)->regs.name)

static __always_inline void record_registers(struct bpf_perf_event_data *ctx, const struct ecpi_sample_key *key,
					     __u64 pid_tgid)
{
	struct ecpi_register_record *rec;

	if (!registers_turn())
		return;
	rec = bpf_ringbuf_reserve(&registers_rb, sizeof(*rec), 0);
	if (!rec) {
		count(key->event, ECPI_COUNTER_REGISTERS_LOST);
		return;
	}
	rec->kind = ECPI_RECORD_REGISTERS;
	rec->event = key->event;
	rec->pad = 0;
	rec->tgid = key->tgid;
	rec->tid = (__u32)pid_tgid;
	rec->time_ns = bpf_ktime_get_ns();
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
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
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
	__u64 *idle;

#ifdef ECPI_TEST_HOOKS
	if (test_sample_cost_ns) {
		__u64 end = bpf_ktime_get_ns() + test_sample_cost_ns;

		bpf_loop(1 << 23, spin_until, &end, 0);
	}
#endif
	if (filter_tgids && !bpf_map_lookup_elem(&tracked_tgids, &tgid))
		return 0;
	if (exclude_tgid && tgid == exclude_tgid)
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
	if (registers_every && !key.kernel)
		record_registers(ctx, &key, pid_tgid);

	if (capture_stacks)
		return record_stack(ctx, &key);
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
