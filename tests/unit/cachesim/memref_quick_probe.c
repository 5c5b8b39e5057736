/* See memref_quick_probe.h. */
#include "memref_quick_probe.h"

#include <stdlib.h>

#include "rt_internal.h"

uint64_t memref_quick_word(uint64_t addr, unsigned size_log2, unsigned write)
{
	return ecpi_rt_memref_word(addr, size_log2, write);
}

void memref_quick_run(struct memref_quick_case *c)
{
	struct ecpi_rt_ring ring = {0};
	struct ecpi_rt_record *records = calloc(c->ring_records, sizeof(*records));
	struct ecpi_rt_thread t = {0};
	t.ring = &ring;
	t.records = records;
	t.mask = c->ring_records - 1;
	t.state = c->active ? ECPI_RT_THREAD_ACTIVE : ECPI_RT_THREAD_NEW;
	t.in_runtime = c->in_runtime;
	t.head = c->head;
	t.sampler.countdown = c->countdown;
	t.sampler.on_left = c->on_left;
	for (uint32_t i = 0; i < c->calls; i++)
		c->result = ecpi_rt_memref_quick(&t, c->w0, c->pc);
	c->record_w0 = records[c->head & t.mask].w0;
	c->record_w1 = records[c->head & t.mask].w1;
	c->head_after = t.head;
	c->published = ring.head;
	c->countdown_after = t.sampler.countdown;
	c->on_left_after = t.sampler.on_left;
	free(records);
}
