/* See ring_claim_probe.h. */
#include "ring_claim_probe.h"

#include <stddef.h>

static struct ecpi_rt_record *claim_base;
static uint64_t *claim_out;
static uint32_t claim_count;

#define ECPI_RT_CLAIM_LINE(rec) (claim_out[claim_count++] = (uint64_t)((rec) - claim_base))
#include "rt_internal.h"

uint32_t ring_claim_run(uint64_t head, uint64_t cached_tail, uint32_t ring_records, uint32_t want, uint64_t *claimed)
{
	static struct ecpi_rt_record records[1024];
	static struct ecpi_rt_thread t; /* 2 KiB of log: not on the stack */
	t = (struct ecpi_rt_thread){.records = records, .head = head, .cached_tail = cached_tail, .mask = ring_records - 1};
	claim_base = records;
	claim_out = claimed;
	claim_count = 0;
	ecpi_rt_ring_claim_ahead(&t, want);
	return claim_count;
}
