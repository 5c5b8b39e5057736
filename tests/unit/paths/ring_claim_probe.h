/* Runs the claim a span's end makes on the ring's next lines
 * (runtime/rt_internal.h: ecpi_rt_ring_claim_ahead; C only) on a thread
 * state built by hand, recording which records' lines it claims instead of
 * prefetching them, for ring_claim_test.cpp. */
#ifndef ECPI_TEST_RING_CLAIM_PROBE_H
#define ECPI_TEST_RING_CLAIM_PROBE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A ring of `ring_records` (a power of two, at most 1024) records whose
 * producer has written `head` records and last saw the consumer's tail at
 * `cached_tail`; claims `want` records ahead. Writes the ring index of each
 * claimed line's record to `claimed` (room for 1024) and returns how many
 * lines were claimed. */
uint32_t ring_claim_run(uint64_t head, uint64_t cached_tail, uint32_t ring_records, uint32_t want, uint64_t *claimed);

#ifdef __cplusplus
}
#endif

#endif
