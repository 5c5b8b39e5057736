/* The one header shared by the BPF programs and user space (STYLE.md rule 2).
 * Plain C, fixed-width types; the C++ side static_asserts every size.
 * Bump ECPI_ABI_VERSION whenever a struct below changes. */
#ifndef ECPI_ABI_H
#define ECPI_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define ECPI_ABI_VERSION 1

/* Events one recording may sample at once (-e ...). The event index travels
 * as the perf link's bpf cookie. */
#define ECPI_MAX_EVENTS 8
/* Frames kept per side (kernel, user) of a -g sample. */
#define ECPI_MAX_STACK_DEPTH 64

/* Every ring-buffer record starts with one of these tags; the consumer
 * rejects unknown tags loudly. */
enum ecpi_record_kind {
	ECPI_RECORD_SAMPLE = 1,       /* one sample the aggregation table could not take */
	ECPI_RECORD_STACK_SAMPLE = 2, /* one sample with its call stacks (-g) */
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
	__u64 ips[2 * ECPI_MAX_STACK_DEPTH]; /* leaf first on each side */
};

/* Per-CPU counters, one block of ECPI_COUNTER_MAX per event:
 * index = event * ECPI_COUNTER_MAX + counter. */
enum ecpi_counter {
	ECPI_COUNTER_SAMPLES = 0,      /* samples taken for tracked processes */
	ECPI_COUNTER_TABLE_FULL = 1,   /* samples sent to the ring buffer because the table was full */
	ECPI_COUNTER_RINGBUF_LOST = 2, /* samples the ring buffer could not take: lost */
	ECPI_COUNTER_STACK_ERRORS = 3, /* stack walks that failed (sample kept, stack empty) */
	ECPI_COUNTER_MAX = 4,
};
#define ECPI_COUNTER_SLOTS (ECPI_MAX_EVENTS * ECPI_COUNTER_MAX)

#endif /* ECPI_ABI_H */
