/* The one header shared by the BPF programs and user space (STYLE.md rule 2).
 * Plain C, fixed-width types; the C++ side static_asserts every size.
 * Bump ECPI_ABI_VERSION whenever a struct below changes. */
#ifndef ECPI_ABI_H
#define ECPI_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define ECPI_ABI_VERSION 8

/* Events one recording may sample at once (-e ...). The event index travels
 * as the perf link's bpf cookie. */
#define ECPI_MAX_EVENTS 8
/* The cookie of the overhead-budget calibration event (a cpu-clock event on
 * the loader's own thread, loader/collect/budget.cpp): its samples run the whole
 * handler and are dropped at the drain. Recordings use the indices below it. */
#define ECPI_CALIBRATION_EVENT (ECPI_MAX_EVENTS - 1)
/* Frames kept of a -g sample's kernel stack, and of its user stack (the
 * frame-pointer walk keeps at most ECPI_MAX_STACK_DEPTH of them, the CFI walk
 * ECPI_MAX_USER_STACK_DEPTH). */
#define ECPI_MAX_STACK_DEPTH 64
#define ECPI_MAX_USER_STACK_DEPTH 128

/* Every ring-buffer record starts with one of these tags; the consumer
 * rejects unknown tags loudly. */
enum ecpi_record_kind {
	ECPI_RECORD_SAMPLE = 1,       /* one sample the aggregation table could not take */
	ECPI_RECORD_STACK_SAMPLE = 2, /* one sample with its call stacks (-g) */
	ECPI_RECORD_PROBE_ENTRY = 3,  /* ecpi probe: one call of a probed function, with its call path */
	ECPI_RECORD_PROBE_EXIT = 4,   /* ecpi probe: the return of a timed call, with its timers */
	ECPI_RECORD_REGISTERS = 5,    /* the user registers of one sample (--registers), own ring buffer */
	ECPI_RECORD_STACK_COPY = 6,   /* a -g sample whose process has no unwind tables yet: stack bytes */
	ECPI_RECORD_EXEC_ARGS = 7,    /* a process's argument strings, read at its exec (own ring buffer) */
	ECPI_RECORD_STACK_PACKED = 8, /* a CFI-walked -g sample: ecpi_stack_record, frames packed, sent short */
	ECPI_RECORD_STACK_REGISTERS = 9, /* a CFI-walked -g sample with its registers: one record, not two */
};

/* DCPI 4.2.1: samples aggregate by (process, pc, event); we add the privilege
 * level so kernel and user addresses can never be confused. */
struct ecpi_sample_key {
	__u32 tgid;
	__u16 event;  /* index into the loader's event list */
	__u8 kernel;  /* 1 when the pc was sampled in kernel mode */
	__u8 pad;
	__u64 pc;
};

struct ecpi_sample_record {
	__u32 kind; /* ECPI_RECORD_SAMPLE */
	__u32 pad;
	struct ecpi_sample_key key;
};

struct ecpi_stack_record {
	__u32 kind; /* ECPI_RECORD_STACK_SAMPLE */
	__u16 kernel_depth; /* frames in ips[0 .. kernel_depth) */
	__u16 user_depth;   /* frames in ips[ECPI_MAX_STACK_DEPTH .. + user_depth) */
	struct ecpi_sample_key key;
	__u64 time_ns; /* bpf_ktime_get_ns() (CLOCK_MONOTONIC): user space names the frames with the
	                * mappings of that moment (a mapping replaced after it still names them) */
	__u64 ips[ECPI_MAX_STACK_DEPTH + ECPI_MAX_USER_STACK_DEPTH]; /* leaf first on each side */
};
/* ECPI_RECORD_STACK_PACKED: the same record, but the user frames follow the
 * kernel ones in ips[kernel_depth .. kernel_depth + user_depth), and the
 * record is sent only that long (offsetof(ips) + 8 * (kernel_depth + user_depth)
 * bytes): a 30-frame user stack is 272 bytes instead of 1,568. */

/* ---- CFI unwinding of user stacks (-g, --call-graph cfi) ---------------
 * User space compiles each image's .eh_frame/.debug_frame into sorted rows
 * (loader/unwind/unwind_table.cpp); the sampler finds a pc's row by binary search
 * and recovers the caller's pc, sp and rbp from it. */
enum ecpi_unwind_kind {
	ECPI_UNWIND_NONE = 0,     /* no CFI from this pc on (a gap between FDEs) */
	ECPI_UNWIND_CFA_RSP = 1,  /* CFA = rsp + 8 * cfa_offset8 */
	ECPI_UNWIND_CFA_RBP = 2,  /* CFA = rbp + 8 * cfa_offset8 */
	ECPI_UNWIND_PLT = 3,      /* PLT stub: CFA = rsp + 8, + 8 more when (pc & 15) >= cfa_offset8 */
	ECPI_UNWIND_END = 4,      /* the return address is undefined: the thread's outermost frame */
	ECPI_UNWIND_INVALID = 5,  /* a rule the sampler cannot evaluate (expressions, other registers) */
	ECPI_UNWIND_SIGNAL = 6,   /* the sigreturn trampoline (CIE augmentation 'S'): the interrupted
	                           * registers are in the ucontext at rsp (ECPI_SIGFRAME_*) */
};

/* x86-64 rt_sigframe seen from the trampoline (the handler's ret popped
 * pretcode): rsp points at the ucontext, whose uc_mcontext starts 40 bytes
 * in (uc_flags, uc_link, uc_stack); struct sigcontext_64 order r8..r15, rdi,
 * rsi, rbp, rbx, rdx, rax, rcx, rsp, rip. */
#define ECPI_SIGFRAME_RBP (40 + 10 * 8)
#define ECPI_SIGFRAME_RSP (40 + 15 * 8)
#define ECPI_SIGFRAME_RIP (40 + 16 * 8)

/* From `pc` (an ELF virtual address) to the next row's pc. The return
 * address is always at CFA - 8 (other rules are INVALID). */
struct ecpi_unwind_row {
	__u32 pc;
	__u8 kind;          /* enum ecpi_unwind_kind */
	__s8 rbp_offset8;   /* 0: rbp unchanged; else the caller's rbp is saved at CFA + 8 * rbp_offset8 */
	__u16 cfa_offset8;
};

/* One image's rows in the shared row array, and its page index: for page
 * k = (vaddr >> ECPI_UNWIND_PAGE_SHIFT) - base_page, k < pages, the row of
 * vaddr lies in [pages_of[k], pages_of[k + 1]) - 1 .. where pages_of is the
 * slice unwind_pages[first_page .. first_page + pages] (pages + 1 entries, each
 * the number of the table's rows whose pc is below page k's start). The
 * sampler then searches a few rows instead of the whole table. pages == 0:
 * no index (the whole table is searched). */
#define ECPI_UNWIND_PAGE_SHIFT 12
struct ecpi_unwind_table {
	__u32 first_row;
	__u32 rows;
	__u32 first_page;
	__u32 pages;
	__u32 base_page;
	__u32 pad;
};

#define ECPI_UNWIND_MAX_TABLES 8192
#define ECPI_UNWIND_MAX_MAPPINGS 256 /* a power of two (the sampler masks indices) */
#define ECPI_UNWIND_NO_TABLE 0xffffffffu /* mapping of an image without usable CFI */

/* One executable mapping of a process: pc in [start, end) has the ELF
 * virtual address pc - bias in table `table`. */
struct ecpi_unwind_mapping {
	__u64 start;
	__u64 end;
	__u64 bias;
	__u32 table;
	__u32 pad;
};

/* A process's executable mappings, sorted by start. `generation` is new
 * every time the loader writes an entry (any process, never 0): rows the
 * sampler found for earlier samples are kept per CPU under it and are used
 * only while the process's entry is the one they were found in. */
struct ecpi_unwind_process {
	__u32 count;
	__u32 generation;
	struct ecpi_unwind_mapping mappings[ECPI_UNWIND_MAX_MAPPINGS];
};

/* A -g sample taken before its process's tables reached the kernel (its
 * first milliseconds): the user registers and up to ECPI_STACK_COPY_BYTES
 * of its user stack from sp, unwound in user space with the same tables
 * once they load (loader/unwind/stack_copy.cpp). Sent with its true size:
 * stack[] holds stack_bytes bytes. */
#define ECPI_STACK_COPY_BYTES 16384
struct ecpi_stack_copy_record {
	__u32 kind;         /* ECPI_RECORD_STACK_COPY */
	__u16 kernel_depth; /* frames in kernel_ips[0 .. kernel_depth) */
	__u16 stack_bytes;  /* bytes in stack[], copied from sp up */
	struct ecpi_sample_key key;
	__u64 time_ns; /* bpf_ktime_get_ns(), as ecpi_stack_record's */
	__u64 pc;
	__u64 sp;
	__u64 bp;
	__u64 kernel_ips[ECPI_MAX_STACK_DEPTH];
	__u8 stack[ECPI_STACK_COPY_BYTES];
};

/* A process's argument strings as exec left them on its new stack, read in
 * the sched_process_exec tracepoint: a process that exits within a drain of
 * its exec is gone from /proc before user space can read its command line
 * (issue 34 defect 2). Sent with its true size: args[] holds args_bytes
 * bytes, NUL-separated, the first ECPI_EXEC_ARGS_BYTES of a longer list
 * (truncated = 1); user space reads /proc for the whole list while the
 * process lives. */
#define ECPI_EXEC_ARGS_BYTES 4096 /* a power of two (the sampler masks the length) */
struct ecpi_exec_record {
	__u32 kind;       /* ECPI_RECORD_EXEC_ARGS */
	__u32 tgid;
	__u16 args_bytes; /* bytes in args[] */
	__u8 truncated;   /* 1 when the argument list was longer than ECPI_EXEC_ARGS_BYTES */
	__u8 pad[5];
	__u8 args[ECPI_EXEC_ARGS_BYTES];
};

/* x86-64 general-purpose registers in hardware encoding order (ModRM/REX
 * number), as store::GpRegister: rax rcx rdx rbx rsp rbp rsi rdi r8..r15. */
#define ECPI_GP_REGISTERS 16

/* The user-mode registers of one sample, with its thread and time, so that
 * user space can pair consecutive snapshots of a thread (issue 21, DCPI 6.1). */
struct ecpi_register_record {
	__u32 kind;  /* ECPI_RECORD_REGISTERS */
	__u16 event; /* index into the loader's event list */
	/* The status flags the interrupted user code held (EFLAGS' low 12 bits:
	 * CF, PF, AF, ZF, SF, OF) with ECPI_FLAGS_RECORDED set: at a conditional
	 * jump they say which way it goes, whatever set them (a compare with
	 * memory, a decrement). 0 from senders that predate them. */
	__u16 flags;
	__u32 tgid;
	__u32 tid;
	__u64 time_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 pc;
	__u64 regs[ECPI_GP_REGISTERS];
};
#define ECPI_FLAGS_RECORDED 0x8000
#define ECPI_FLAGS_STATUS_MASK 0x0fff

/* ECPI_RECORD_STACK_REGISTERS: a CFI-walked -g sample that keeps its
 * registers (--registers) sends both in one ring-buffer record instead of
 * two (one reserve and commit a sample fewer): the register record (kind
 * ECPI_RECORD_STACK_REGISTERS), then the packed stack record (kind
 * ECPI_RECORD_STACK_PACKED), sent as long as its frames, that is
 * sizeof(regs) + offsetof(ecpi_stack_record, ips) + 8 * (kernel_depth + user_depth)
 * bytes. The handler builds it in a per-CPU scratch value. */
struct ecpi_register_stack_record {
	struct ecpi_register_record regs;
	struct ecpi_stack_record stack;
};

/* Per-CPU counters, one block of ECPI_COUNTER_MAX per event:
 * index = event * ECPI_COUNTER_MAX + counter. */
enum ecpi_counter {
	ECPI_COUNTER_SAMPLES = 0,      /* samples taken for tracked processes */
	ECPI_COUNTER_TABLE_FULL = 1,   /* samples sent to the ring buffer because the table was full */
	ECPI_COUNTER_RINGBUF_LOST = 2, /* samples the ring buffer could not take: lost */
	ECPI_COUNTER_STACK_ERRORS = 3, /* stack walks that failed (sample kept, stack empty) */
	ECPI_COUNTER_REGISTERS_LOST = 4, /* register snapshots the register ring buffer could not take */
	/* How each user stack walk of a -g sample ended (exactly one per walk). */
	ECPI_COUNTER_STACK_ROOT = 5,        /* CFI walk reached the thread's outermost frame */
	ECPI_COUNTER_STACK_FP = 6,          /* frame-pointer walk (--call-graph fp): whether it is whole is unknown */
	ECPI_COUNTER_CUT_NO_TABLE = 7,      /* cut: the process or image has no unwind table (yet) */
	ECPI_COUNTER_CUT_NO_ROW = 8,        /* cut: a pc outside every CFI row and frame pointers ended */
	ECPI_COUNTER_CUT_UNSUPPORTED = 9,   /* cut: a rule the sampler cannot evaluate and frame pointers ended */
	ECPI_COUNTER_CUT_DEPTH = 10,        /* cut: ECPI_MAX_USER_STACK_DEPTH frames */
	ECPI_COUNTER_CUT_UNREADABLE = 11,   /* cut: stack memory unreadable, or a frame not moving up the stack */
	ECPI_COUNTER_MAX = 12,
};
#define ECPI_COUNTER_SLOTS (ECPI_MAX_EVENTS * ECPI_COUNTER_MAX)

/* ---- ecpi probe: targeted call-path probes (iPath) -------------------
 * probe.bpf.c runs one uprobe program (entry) and one uretprobe program
 * (exit) for every probed function; the bpf cookie of each link says which
 * function and whether it is timed. Entry records carry the call path, exit
 * records the timers; user space joins them by (tid, start_ns) and
 * aggregates per (function, call path). */

/* Return addresses kept per call path (frame-pointer walk). */
#define ECPI_PROBE_MAX_DEPTH 64
/* Calls of probed functions one thread may have open at once (iPath 4.2's
 * active stack); deeper calls are counted but not timed. Power of two. */
#define ECPI_PROBE_MAX_ACTIVE 32
/* Bytes of the user stack copied for DWARF unwinding (--unwind dwarf). */
#define ECPI_PROBE_STACK_BYTES 8192

/* bpf cookie of a probe link: the probe id in the low 32 bits, flags above. */
#define ECPI_PROBE_COOKIE_TIMED (1ULL << 32) /* entry pushes onto the active stack */

/* ecpi_probe_entry_record.flags: how the frame-pointer walk ended. */
enum ecpi_probe_path_flags {
	ECPI_PROBE_PATH_FP_END = 1 << 0,   /* reached a zero frame pointer (outermost frame) */
	ECPI_PROBE_PATH_DEPTH = 1 << 1,    /* stopped at ECPI_PROBE_MAX_DEPTH frames */
	ECPI_PROBE_PATH_BROKEN = 1 << 2,   /* unreadable frame or frame pointer not moving up the stack */
	ECPI_PROBE_PATH_UNTIMED = 1 << 3,  /* a timed probe whose call could not be timed (active stack full, not sampled) */
	ECPI_PROBE_PATH_STACK = 1 << 4,    /* an ecpi_probe_stack follows the ips (DWARF unwinding) */
};

struct ecpi_probe_entry_record {
	__u32 kind;      /* ECPI_RECORD_PROBE_ENTRY */
	__u32 probe_id;
	__u32 tgid;
	__u32 tid;
	__u64 start_ns;  /* join key of the exit record; 0 when the call is not timed */
	__u16 depth;     /* return addresses in ips, innermost (the probed function's call site) first */
	__u16 flags;     /* enum ecpi_probe_path_flags */
	__u32 pad;
	__u64 ips[ECPI_PROBE_MAX_DEPTH]; /* only the first `depth` are sent */
};

/* Follows the whole ips array (at sizeof(struct ecpi_probe_entry_record))
 * when ECPI_PROBE_PATH_STACK is set; only `size` bytes of data are sent. */
struct ecpi_probe_stack {
	__u64 ip, sp, bp;   /* registers at function entry */
	__u32 size;         /* bytes copied from sp upwards */
	__u32 pad;
	__u8 data[ECPI_PROBE_STACK_BYTES];
};

struct ecpi_probe_exit_record {
	__u32 kind;      /* ECPI_RECORD_PROBE_EXIT */
	__u32 probe_id;
	__u32 tgid;
	__u32 tid;
	__u64 start_ns;  /* the entry record's start_ns */
	__u64 wall_ns;   /* entry to return */
	__u64 cpu_ns;    /* on-CPU part of wall_ns, from the task's scheduler accounting */
};

/* One open call on a thread's active stack. */
struct ecpi_probe_open_call {
	__u32 probe_id;
	__u32 pad;
	__u64 sp;          /* stack pointer at entry (points at the return address) */
	__u64 start_ns;
	__u64 runtime_ns;  /* task->se.sum_exec_runtime at entry */
	__u64 exec_start;  /* task->se.exec_start at entry */
};

struct ecpi_probe_active {
	__u32 depth;
	__u32 skip_left;   /* --sample: calls still to skip before the next burst */
	__u32 burst_left;  /* --sample: calls still to time in this burst */
	__u32 pad;
	struct ecpi_probe_open_call calls[ECPI_PROBE_MAX_ACTIVE];
};

/* Per-CPU counters of probe.bpf.c; every drop has one. */
enum ecpi_probe_counter {
	ECPI_PROBE_COUNTER_CALLS = 0,          /* entries seen */
	ECPI_PROBE_COUNTER_RINGBUF_LOST = 1,   /* records the ring buffer could not take (counts inexact) */
	ECPI_PROBE_COUNTER_ACTIVE_FULL = 2,    /* calls not timed: the thread's active stack was full */
	ECPI_PROBE_COUNTER_EXIT_UNMATCHED = 3, /* returns with no matching entry on the active stack */
	ECPI_PROBE_COUNTER_ABANDONED = 4,      /* open calls dropped from the active stack (longjmp, exceptions) */
	ECPI_PROBE_COUNTER_THREADS_FULL = 5,   /* calls not timed: no room for another thread's active stack */
	ECPI_PROBE_COUNTER_STACK_COPY_ERRORS = 6, /* user stack copies that failed (DWARF mode) */
	ECPI_PROBE_COUNTER_MAX = 8,
};

#endif /* ECPI_ABI_H */
