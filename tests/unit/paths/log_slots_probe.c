/* See log_slots_probe.h. */
#include "log_slots_probe.h"

#include "rt_internal.h"

static uint64_t kept_window(uint64_t armed)
{
	if (armed + ECPI_RT_SPAN_CONTEXT + 1 <= ECPI_RT_LOG_ENTRIES)
		return armed + ECPI_RT_SPAN_CONTEXT + 1;
	return armed < ECPI_RT_LOG_ENTRIES ? armed : ECPI_RT_LOG_ENTRIES;
}

void log_slots_run(const uint64_t *countdowns, uint32_t count, uint32_t run_outs, struct log_slots_result *out)
{
	static struct ecpi_rt_thread t; /* 2 KiB of log: not on the stack */
	t = (struct ecpi_rt_thread){.path_sampler = {.countdown = 1}, .log_armed = 1};
	*out = (struct log_slots_result){.last_run_out_slot_1 = 1};
	uint64_t position = 0;
	while (out->run_outs < run_outs) {
		uint64_t logged = position++ + 1000;
		if (ecpi_rt_log_step(&t, logged) != 0)
			continue;
		uint64_t armed = t.log_armed;
		t.log_pos += armed;
		out->last_run_out_slot_1 &= t.log[1] == logged;
		uint64_t last = t.log_pos - 1, window = kept_window(armed);
		for (uint64_t k = 0; k < window && k <= last; k++) {
			out->checked++;
			if (ecpi_rt_log_at(&t, last, last - k) != last - k + 1000 && out->wrong++ == 0) {
				out->first_wrong_position = last - k;
				out->first_wrong_countdown = armed;
			}
		}
		t.path_sampler.countdown = (int64_t)countdowns[out->run_outs++ % count];
		ecpi_rt_log_rearm(&t);
	}
}
