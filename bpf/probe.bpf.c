// SPDX-License-Identifier: GPL-2.0
/* Targeted call-path probes (`ecpi probe`, iPath 3-4.2): one uprobe program
 * for the entry of every probed function and one uretprobe program for the
 * exit of the timed ones. The entry walks the call path (the return address
 * at the stack pointer, then the frame-pointer chain) and sends it with the
 * call; the exit sends wall and on-CPU time, matched to its entry through a
 * per-thread active stack (iPath 4.2). Aggregation per (function, path) is
 * done in user space. Nothing is printed and every drop is counted. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "ecpi_abi.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by the loader before load. */
const volatile __u32 target_tgid = 0;  /* only this process (0: any; the links filter too) */
const volatile __u32 sample_skip = 0;  /* --sample 1/N: mean calls skipped between bursts (0: time every call) */
const volatile __u32 sample_burst = 1; /* --sample: calls timed per burst */
const volatile bool copy_stack = false; /* --unwind dwarf: copy the top of the user stack */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); /* the loader resizes before load */
} probe_rb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ECPI_PROBE_COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
} probe_counters SEC(".maps");

/* Per-thread active stacks, keyed by tid. Entries of threads that died with
 * calls open stay and are reported by the loader at the end. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct ecpi_probe_active);
} active_stacks SEC(".maps");

/* The record is built here (too big for the BPF stack) and sent with only
 * the frames it uses. */
struct probe_scratch {
	struct ecpi_probe_entry_record rec;
	struct ecpi_probe_stack stack;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct probe_scratch);
} scratch SEC(".maps");

/* Never written: the zero value a new active stack starts from. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ecpi_probe_active);
} zero_active SEC(".maps");

static __always_inline void count(__u32 counter)
{
	__u64 *value = bpf_map_lookup_elem(&probe_counters, &counter);

	if (value)
		*value += 1; /* per-CPU: no atomics needed */
}

/* The task's on-CPU time comes from the scheduler's accounting (CO-RE):
 * sum_exec_runtime is brought up to date only at ticks and switches, at
 * exec_start. Across one call, on-CPU = d(sum_exec_runtime) + wall -
 * d(exec_start): the clocks' constant offset cancels. */
static __always_inline void read_runtime(__u64 *runtime, __u64 *exec_start)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();

	*runtime = BPF_CORE_READ(task, se.sum_exec_runtime);
	*exec_start = BPF_CORE_READ(task, se.exec_start);
}

/* iPath 3: at entry the probed function has not built its frame, so the
 * immediate call site is the return address at the stack pointer and the
 * rest of the path comes from the caller's frame-pointer chain. */
static __always_inline void walk_path(struct pt_regs *ctx, struct ecpi_probe_entry_record *rec)
{
	__u64 sp = PT_REGS_SP(ctx), fp = PT_REGS_FP(ctx);
	__u64 frame[2]; /* saved frame pointer, return address */
	__u32 n = 0;
	int i;

	rec->flags = 0;
	if (bpf_probe_read_user(&rec->ips[0], sizeof(__u64), (void *)sp) != 0) {
		rec->flags = ECPI_PROBE_PATH_BROKEN;
		rec->depth = 0;
		return;
	}
	n = 1;
	for (i = 0; i < ECPI_PROBE_MAX_DEPTH - 1; i++) {
		if (fp == 0) {
			rec->flags = ECPI_PROBE_PATH_FP_END;
			break;
		}
		if (fp < sp || (fp & 7) || bpf_probe_read_user(frame, sizeof(frame), (void *)fp) != 0) {
			rec->flags = ECPI_PROBE_PATH_BROKEN;
			break;
		}
		if (frame[1] == 0) {
			rec->flags = ECPI_PROBE_PATH_FP_END;
			break;
		}
		rec->ips[n & (ECPI_PROBE_MAX_DEPTH - 1)] = frame[1];
		n++;
		/* Callers' frames lie above: a chain that does not move up the
		 * stack is broken (code without frame pointers reused rbp). */
		if (frame[0] != 0 && frame[0] <= fp) {
			rec->flags = ECPI_PROBE_PATH_BROKEN;
			break;
		}
		sp = fp;
		fp = frame[0];
	}
	if (rec->flags == 0)
		rec->flags = ECPI_PROBE_PATH_DEPTH;
	rec->depth = n;
}

/* Copies the top of the user stack for DWARF unwinding in user space. */
static __always_inline void copy_user_stack(struct pt_regs *ctx, struct ecpi_probe_stack *st)
{
	__u64 sp = PT_REGS_SP(ctx);
	__u32 to_page_end = 4096 - (sp & 4095);

	st->ip = PT_REGS_IP(ctx);
	st->sp = sp;
	st->bp = PT_REGS_FP(ctx);
	st->pad = 0;
	/* The stack may end less than ECPI_PROBE_STACK_BYTES above sp. */
	if (bpf_probe_read_user(st->data, ECPI_PROBE_STACK_BYTES, (void *)sp) == 0) {
		st->size = ECPI_PROBE_STACK_BYTES;
	} else if (bpf_probe_read_user(st->data, ECPI_PROBE_STACK_BYTES / 2, (void *)sp) == 0) {
		st->size = ECPI_PROBE_STACK_BYTES / 2;
	} else if (to_page_end <= 4096 &&
		   bpf_probe_read_user(st->data, to_page_end & 4095, (void *)sp) == 0) {
		st->size = to_page_end & 4095;
	} else {
		st->size = 0;
		count(ECPI_PROBE_COUNTER_STACK_COPY_ERRORS);
	}
}

/* --sample 1/N: time calls in bursts, with a random gap before each burst
 * (MemSpy 7.2: randomized starts so periodic behaviour is not aliased). */
static __always_inline bool sampled(struct ecpi_probe_active *st)
{
	if (sample_skip == 0)
		return true;
	if (st->burst_left > 0) {
		st->burst_left--;
		return true;
	}
	if (st->skip_left > 0) {
		st->skip_left--;
		return false;
	}
	st->burst_left = sample_burst - 1;
	/* Uniform in [0, 2 * mean]: the mean gap stays sample_skip. */
	st->skip_left = bpf_get_prandom_u32() % (2 * sample_skip + 1);
	return true;
}

/* iPath 4.2: push the open call; first drop calls whose frames are gone
 * (longjmp or an exception unwound past them: their sp is not above ours). */
static __always_inline void push_open_call(struct pt_regs *ctx, __u32 tid, __u32 probe_id,
					   struct ecpi_probe_entry_record *rec)
{
	struct ecpi_probe_active *st;
	struct ecpi_probe_open_call *call;
	__u64 sp = PT_REGS_SP(ctx);
	__u32 zero = 0, d;
	int i;

	st = bpf_map_lookup_elem(&active_stacks, &tid);
	if (!st) {
		void *init = bpf_map_lookup_elem(&zero_active, &zero);

		if (!init)
			return;
		if (bpf_map_update_elem(&active_stacks, &tid, init, BPF_NOEXIST) != 0 &&
		    !bpf_map_lookup_elem(&active_stacks, &tid)) {
			count(ECPI_PROBE_COUNTER_THREADS_FULL);
			rec->flags |= ECPI_PROBE_PATH_UNTIMED;
			return;
		}
		st = bpf_map_lookup_elem(&active_stacks, &tid);
		if (!st)
			return;
	}
	for (i = 0; i < ECPI_PROBE_MAX_ACTIVE; i++) {
		d = st->depth;
		if (d == 0 || d > ECPI_PROBE_MAX_ACTIVE)
			break;
		if (st->calls[(d - 1) & (ECPI_PROBE_MAX_ACTIVE - 1)].sp > sp)
			break;
		st->depth = d - 1;
		count(ECPI_PROBE_COUNTER_ABANDONED);
	}
	if (!sampled(st)) {
		rec->flags |= ECPI_PROBE_PATH_UNTIMED;
		return;
	}
	d = st->depth;
	if (d >= ECPI_PROBE_MAX_ACTIVE) {
		count(ECPI_PROBE_COUNTER_ACTIVE_FULL);
		rec->flags |= ECPI_PROBE_PATH_UNTIMED;
		return;
	}
	call = &st->calls[d & (ECPI_PROBE_MAX_ACTIVE - 1)];
	call->probe_id = probe_id;
	call->pad = 0;
	call->sp = sp;
	read_runtime(&call->runtime_ns, &call->exec_start);
	/* Taken last: the probe's own work is not charged to the call. */
	call->start_ns = bpf_ktime_get_ns();
	rec->start_ns = call->start_ns;
	st->depth = d + 1;
}

SEC("uprobe")
int ecpi_probe_entry(struct pt_regs *ctx)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id, zero = 0, size;
	struct probe_scratch *s;
	long err;

	if (target_tgid && tgid != target_tgid)
		return 0;
	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;
	count(ECPI_PROBE_COUNTER_CALLS);
	s->rec.kind = ECPI_RECORD_PROBE_ENTRY;
	s->rec.probe_id = (__u32)cookie;
	s->rec.tgid = tgid;
	s->rec.tid = tid;
	s->rec.start_ns = 0;
	s->rec.pad = 0;
	walk_path(ctx, &s->rec);
	if (copy_stack) {
		copy_user_stack(ctx, &s->stack);
		s->rec.flags |= ECPI_PROBE_PATH_STACK;
	}
	if (cookie & ECPI_PROBE_COOKIE_TIMED)
		push_open_call(ctx, tid, (__u32)cookie, &s->rec);

	if (copy_stack) {
		size = sizeof(s->rec) + __builtin_offsetof(struct ecpi_probe_stack, data) +
		       (s->stack.size & (2 * ECPI_PROBE_STACK_BYTES - 1));
		if (size > sizeof(*s))
			size = sizeof(*s);
	} else {
		size = s->rec.depth;
		if (size > ECPI_PROBE_MAX_DEPTH)
			size = ECPI_PROBE_MAX_DEPTH;
		size = __builtin_offsetof(struct ecpi_probe_entry_record, ips) + size * sizeof(__u64);
	}
	/* The loader consumes on a timer; waking it per call would cost more
	 * than the probe itself. */
	err = bpf_ringbuf_output(&probe_rb, s, size, BPF_RB_NO_WAKEUP);
	if (err)
		count(ECPI_PROBE_COUNTER_RINGBUF_LOST);
	return 0;
}

SEC("uretprobe")
int ecpi_probe_exit(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id, probe_id = (__u32)cookie, d;
	__u64 sp = PT_REGS_SP(ctx), runtime, exec_start, wall, cpu;
	struct ecpi_probe_active *st;
	struct ecpi_probe_open_call *call = NULL;
	struct ecpi_probe_exit_record *rec;
	int i;

	if (target_tgid && tgid != target_tgid)
		return 0;
	read_runtime(&runtime, &exec_start);
	st = bpf_map_lookup_elem(&active_stacks, &tid);
	if (!st) {
		count(ECPI_PROBE_COUNTER_EXIT_UNMATCHED);
		return 0;
	}
	/* The returning call is the newest open call of this function whose
	 * return address sat just below our stack pointer; anything above it
	 * on the active stack was abandoned. */
	d = st->depth;
	for (i = 0; i < ECPI_PROBE_MAX_ACTIVE; i++) {
		struct ecpi_probe_open_call *c;

		if (d == 0 || d > ECPI_PROBE_MAX_ACTIVE)
			break;
		c = &st->calls[(d - 1) & (ECPI_PROBE_MAX_ACTIVE - 1)];
		if (c->probe_id == probe_id && c->sp + 8 == sp) {
			call = c;
			break;
		}
		d--;
	}
	if (!call) {
		count(ECPI_PROBE_COUNTER_EXIT_UNMATCHED);
		return 0;
	}
	wall = now - call->start_ns;
	cpu = (runtime - call->runtime_ns) + wall - (exec_start - call->exec_start);
	if ((__s64)cpu < 0)
		cpu = 0;
	if (cpu > wall)
		cpu = wall;

	rec = bpf_ringbuf_reserve(&probe_rb, sizeof(*rec), 0);
	if (rec) {
		rec->kind = ECPI_RECORD_PROBE_EXIT;
		rec->probe_id = probe_id;
		rec->tgid = tgid;
		rec->tid = tid;
		rec->start_ns = call->start_ns;
		rec->wall_ns = wall;
		rec->cpu_ns = cpu;
		bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	} else {
		count(ECPI_PROBE_COUNTER_RINGBUF_LOST);
	}
	if (st->depth > d)
		count(ECPI_PROBE_COUNTER_ABANDONED); /* calls left open above it: counted once here, exactly by the loader */
	st->depth = d - 1;
	return 0;
}

/* `ecpi probe --bare` (benchmarks only): the cost of the uprobe and
 * uretprobe machinery itself, with nothing done in BPF. */
SEC("uprobe")
int ecpi_probe_empty(struct pt_regs *ctx)
{
	return 0;
}
