/* Writes a span's block entries as the runtime does (runtime/rt_internal.h:
 * ecpi_rt_log_step, ecpi_rt_span_pack; C only), for span_pack_test.cpp. */
#ifndef ECPI_TEST_SPAN_PACK_PROBE_H
#define ECPI_TEST_SPAN_PACK_PROBE_H

#include <stdint.h>

#include "ecpi_rt_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Logs entries[0..n) through the fast path's step on a thread state built
 * by hand, the countdown running out at the last (as at a span's end; n
 * under 256), then packs them into out[0..] (a ring of out_mask + 1
 * records, from position 0). Returns the records written. */
uint32_t span_pack_run(const uint64_t *entries, uint32_t n, struct ecpi_rt_record *out, uint64_t out_mask);

#ifdef __cplusplus
}
#endif

#endif
