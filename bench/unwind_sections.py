#!/usr/bin/env python3
"""Where the CFI handler's time goes (issue 29, docs/UNWIND.md): adds timing
sections to bpf/sampler.bpf.c in place, for a measurement build only (never
commit the result; `git checkout bpf/sampler.bpf.c` undoes it). Each section's
nanoseconds (bpf_ktime_get_ns) and a few counts are summed per CPU in the map
prof_ns, which bench/unwind_sections.sh reads while a recording runs:
  0 samples walked, 1 entry .. the walk, 2 the register snapshot's own ring
  record (none since ABI 8: the registers go in section 5's record),
  3 the walk's setup (kernel stack, process entry, per-CPU lookups),
  4 the walk (bpf_loop), 5 the ring-buffer record, registers included, 6 frames,
  7 row-cache lookups (frames not in the last row's range), 8 row-cache hits,
  9 stack window reads, 10 ns in those reads, 11 ns in row lookups the row
  cache served, 12 ns in those that searched the tables, 13 their count;
  and prof_hist, a histogram of the whole handler's time per walked sample.
The clock reads themselves (about 6 a sample, and two a row lookup and a
window read: a clock read costs tens of ns on a VM) are inside the sections.
With --light only the counts (0, 6-9) and the histogram, two clock reads a
sample: the whole handler's time as near the plain build's as this gets.
With --ab (implies --light) every other sample on a CPU reads the stack in
windows of 512 bytes as before the windows were sized from the last walk
(its want 0): its times go to the histogram's second half (keys 1001-2001),
its window reads to 12 and its walked samples to 13, so that the two ways
are compared in one recording, sample by sample, on the same machine load.
Usage: python3 bench/unwind_sections.py [--light|--ab] [bpf/sampler.bpf.c]"""
import sys

args = sys.argv[1:]
ab = "--ab" in args
light = "--light" in args or ab
args = [a for a in args if a not in ("--light", "--ab")]
path = args[0] if args else "bpf/sampler.bpf.c"
text = open(path).read()


def insert(anchor, replacement):
    global text
    if anchor not in text:
        sys.exit(f"unwind_sections.py: {path} changed, this anchor is gone:\n{anchor}")
    text = text.replace(anchor, replacement, 1)


insert("static __always_inline void count(__u32 event, __u32 counter)",
       """struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} prof_ns SEC(".maps");

static __always_inline void prof_add(__u32 slot, __u64 v)
{
	__u64 *p = bpf_map_lookup_elem(&prof_ns, &slot);

	if (p)
		*p += v;
}

static __always_inline void count(__u32 event, __u32 counter)""")
insert("""	hit->start = hit->end = 0;
	slot = (""", """	hit->start = hit->end = 0;
	prof_add(7, 1);
	slot = (""")
insert("""hit->end = c->end;
""", """hit->end = c->end;
prof_add(8, 1);
""")
insert("""	if (bpf_probe_read_user(win->words, len, (void *)addr))
		return -1;
	return len;""", """	prof_add(9, 1);
	if (bpf_probe_read_user(win->words, len, (void *)addr))
		return -1;
	return len;""")
# Finer: the time of the stack window's reads (10), and of the row lookups
# (unwind_lookup calls) that the row cache served (11) and that went on to
# the mapping and row searches (12), with the count of the latter (13).
light or insert("""	if (bpf_probe_read_user(win->words, len, (void *)addr))
		return -1;
	return len;""", """	__u64 wt0 = bpf_ktime_get_ns();
	long wr = bpf_probe_read_user(win->words, len, (void *)addr);
	prof_add(10, bpf_ktime_get_ns() - wt0);
	if (wr)
		return -1;
	return len;""")
light or insert("""	r = unwind_lookup(p, w->mapping, pc, &w->last);""", """	__u64 lt0 = bpf_ktime_get_ns();
	r = unwind_lookup(p, w->mapping, pc, &w->last);
	lt0 = bpf_ktime_get_ns() - lt0;
	prof_add(w->last.pad == 1 ? 11 : 12, lt0);
	prof_add(13, w->last.pad != 1);""")
light or insert("""	hit->start = hit->end = 0;
	prof_add(7, 1);""", """	hit->start = hit->end = 0;
	hit->pad = 0;
	prof_add(7, 1);""")
light or insert("""prof_add(8, 1);
""", """prof_add(8, 1);
hit->pad = 1;
""")
light or insert("""	struct walk_state w = {};
	struct ecpi_stack_record *rec;
	__u32 zero = 0;
""", """	struct walk_state w = {};
	struct ecpi_stack_record *rec;
	__u32 zero = 0;
	__u64 t0 = bpf_ktime_get_ns(), t1, t2;
""")
light or insert("""		bpf_loop(ECPI_MAX_USER_STACK_DEPTH, walk_step, &w, 0);
		rec->user_depth = w.depth;""", """		t1 = bpf_ktime_get_ns();
		prof_add(3, t1 - t0);
		bpf_loop(ECPI_MAX_USER_STACK_DEPTH, walk_step, &w, 0);
		rec->user_depth = w.depth;
		t0 = bpf_ktime_get_ns();
		prof_add(4, t0 - t1);
		prof_add(6, w.depth);
		prof_add(0, 1);""")
light or insert("""	send_walked(ctx, both, key, pid_tgid, now);
	return 0;
}""", """	send_walked(ctx, both, key, pid_tgid, now);
	t2 = bpf_ktime_get_ns();
	prof_add(5, t2 - t0);
	return 0;
}""")
light and insert("""		bpf_loop(ECPI_MAX_USER_STACK_DEPTH, walk_step, &w, 0);
		rec->user_depth = w.depth;""", """		bpf_loop(ECPI_MAX_USER_STACK_DEPTH, walk_step, &w, 0);
		rec->user_depth = w.depth;
		prof_add(6, w.depth);
		prof_add(0, 1);""")
insert("""	__u64 *idle, now;
""", """	__u64 *idle, now, p0 = bpf_ktime_get_ns();
""")
insert("""	if (capture_stacks && unwind_cfi)
		return record_stack_cfi(ctx, &key, pid_tgid, now);
""", """	prof_add(1, now - p0);
	if (capture_stacks && unwind_cfi)
		return record_stack_cfi(ctx, &key, pid_tgid, now);
""")
# The whole handler's time of each walked sample (entry to the end of the
# record, two clock reads more than bpf_stats sees) in a histogram of 10 ns
# buckets (prof_hist, the last bucket: 10 us or more): its median is not
# moved by the few samples a busy machine disturbs, the mean of bpf_stats is.
insert("""static __always_inline void prof_add(__u32 slot, __u64 v)""", """struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2002);
	__type(key, __u32);
	__type(value, __u64);
} prof_hist SEC(".maps");

static __always_inline void prof_hist_add(__u64 ns)
{
	__u32 slot = ns / 10 > 1000 ? 1000 : ns / 10, k14 = 14;
	__u64 *half = bpf_map_lookup_elem(&prof_ns, &k14), *p;

	if (half && *half)
		slot += 1001;
	p = bpf_map_lookup_elem(&prof_hist, &slot);

	if (p)
		*p += 1;
}

static __always_inline void prof_add(__u32 slot, __u64 v)""")
insert("""		return record_stack_cfi(ctx, &key, pid_tgid, now);
""", """	{
		int ret = record_stack_cfi(ctx, &key, pid_tgid, now);

		prof_hist_add(bpf_ktime_get_ns() - p0);
		return ret;
	}
""")
# --ab: the sample's half (prof_ns 14) from a per-CPU tick (15), taken first.
ab and insert("""	both = bpf_map_lookup_elem(&stack_scratch, &zero);""", """	__u32 k14 = 14, k15 = 15;
	__u64 *tick = bpf_map_lookup_elem(&prof_ns, &k15), *half = bpf_map_lookup_elem(&prof_ns, &k14);

	if (tick && half) {
		*tick += 1;
		*half = *tick & 1;
	}
	both = bpf_map_lookup_elem(&stack_scratch, &zero);""")
ab and insert("""		if (w.win)
			w.want = sp + w.win->extent;""", """		if (w.win)
			w.want = half && *half ? 0 : sp + w.win->extent;
		prof_add(13, half && *half);""")
ab and insert("""	prof_add(9, 1);""", """	prof_add(9, 1);
	{
		__u32 k14 = 14;
		__u64 *half = bpf_map_lookup_elem(&prof_ns, &k14);

		prof_add(12, half && *half);
	}""")
open(path, "w").write(text)
