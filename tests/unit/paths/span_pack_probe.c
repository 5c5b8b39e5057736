/* See span_pack_probe.h. */
#include "span_pack_probe.h"

#include "rt_internal.h"

uint32_t span_pack_run(const uint64_t *entries, uint32_t n, struct ecpi_rt_record *out, uint64_t out_mask)
{
	static struct ecpi_rt_thread t; /* 2 KiB of log: not on the stack */
	t = (struct ecpi_rt_thread){.path_sampler = {.countdown = (int64_t)n}};
	for (uint32_t i = 0; i < n; i++)
		if (ecpi_rt_log_step(&t, entries[i]) == 0 && i + 1 != n)
			return 0; /* ran out early: not a span's layout */
	return ecpi_rt_span_pack(&t, n, out, out_mask, 0);
}
