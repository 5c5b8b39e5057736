/* Drives the runtime's ecpi_rt_memref_quick (runtime/rt_internal.h, C only)
 * on a thread state built by hand, for memref_quick_test.cpp. */
#ifndef ECPI_TEST_MEMREF_QUICK_PROBE_H
#define ECPI_TEST_MEMREF_QUICK_PROBE_H

#include <stdint.h>

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

#ifdef __cplusplus
}
#endif

#endif
