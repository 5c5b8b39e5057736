/* Drives the runtime's ecpi_rt_memref_quick (runtime/rt_internal.h, C only)
 * on a thread state built by hand, for memref_quick_test.cpp. */
#ifndef ECPI_TEST_MEMREF_QUICK_PROBE_H
#define ECPI_TEST_MEMREF_QUICK_PROBE_H

#include <stdint.h>

#include "ecpi_rt_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

struct memref_quick_case {
	/* in: the thread before the calls, and `calls` calls with w0 and pc */
	uint64_t countdown, on_left, head;
	uint32_t active, in_runtime, ring_records, calls;
	uint64_t w0, pc;
	/* out: the last call's result, the first record written, the thread after */
	int result;
	uint64_t record_w0, record_w1, head_after, published, countdown_after, on_left_after;
};

uint64_t memref_quick_word(uint64_t addr, unsigned size_log2, unsigned write);
void memref_quick_run(struct memref_quick_case *c);

/* One reference that reached the slow path: in a window (the countdown ran
 * out, on_left > 1) or, outside one, to a sampled set. */
struct memref_set_step {
	uint64_t w0, pc;
	uint32_t in_window;
	int result; /* out: ecpi_rt_memref_quick's */
};
/* Runs the steps through ecpi_rt_memref_quick on one thread whose sets are
 * lines (64 bytes) chosen by `bitmap`, with header.set_hit_mask `hit_mask`
 * (0: off), then the thread's end (its SET_HITS record, if any, as
 * close_thread_ring writes it). Copies the records written into `out` (at
 * most `room`) and returns their count. */
uint32_t memref_set_run(struct memref_set_step *steps, uint32_t n, uint64_t bitmap, uint32_t hit_mask, struct ecpi_rt_record *out,
                        uint32_t room);

#ifdef __cplusplus
}
#endif

#endif
