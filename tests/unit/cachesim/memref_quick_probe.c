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

uint32_t memref_set_run(struct memref_set_step *steps, uint32_t n, uint64_t bitmap, uint32_t hit_mask, struct ecpi_rt_record *out,
                        uint32_t room)
{
	struct ecpi_rt_ring ring = {0};
	uint32_t records = 1;
	while (records < room)
		records <<= 1;
	struct ecpi_rt_record *ring_records = calloc(records, sizeof(*ring_records));
	struct ecpi_rt_thread *t = calloc(1, sizeof(*t));
	t->ring = &ring;
	t->records = ring_records;
	t->mask = records - 1;
	t->state = ECPI_RT_THREAD_ACTIVE;
	t->set_bitmap = t->set_base = bitmap;
	t->set_shift = 6;
	t->set_hit_mask = hit_mask;
	for (uint32_t i = 0; i < n; i++) {
		t->sampler.countdown = steps[i].in_window ? 0 : 1000;
		t->sampler.on_left = steps[i].in_window ? 1000 : 0;
		steps[i].result = ecpi_rt_memref_quick(t, steps[i].w0, steps[i].pc);
	}
	if (t->set_hits && t->head < room)
		ring_records[t->head++ & t->mask] = (struct ecpi_rt_record){(uint64_t)ECPI_RT_REC_SET_HITS << ECPI_RT_KIND_SHIFT, t->set_hits};
	uint32_t written = (uint32_t)(t->head < room ? t->head : room);
	for (uint32_t i = 0; i < written; i++)
		out[i] = ring_records[i];
	free(t);
	free(ring_records);
	return written;
}
