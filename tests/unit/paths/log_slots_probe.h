/* Drives the inline build's block log (runtime/rt_internal.h:
 * ecpi_rt_log_step, ecpi_rt_log_rearm, ecpi_rt_log_at; C only) on a
 * thread state built by hand, for log_slots_test.cpp. */
#ifndef ECPI_TEST_LOG_SLOTS_PROBE_H
#define ECPI_TEST_LOG_SLOTS_PROBE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct log_slots_result {
	uint64_t run_outs;  /* times the countdown ran out */
	uint64_t checked;   /* entries read back at those run-outs */
	uint64_t wrong;     /* ... that were not the entry logged at that position */
	uint64_t first_wrong_position, first_wrong_countdown; /* the first such (position, the countdown that ran out) */
	uint64_t last_run_out_slot_1; /* 1 when every run-out's own entry was in slot 1 */
};

/* Logs block entries (the entry at position p logs p + 1000) through the
 * fast path's step; each time the countdown runs out, the slow path's part
 * is done as rt_spans.c does it (log_pos, then the next countdown from
 * `countdowns`, cycled, then the re-arm), and every entry the log must
 * still hold is read back by position: the last min(A + 5, 256) when the
 * countdown A that ran out leaves its 5 moved entries in place (A + 5 <=
 * 256), else the last A. Stops after `run_outs` run-outs. */
void log_slots_run(const uint64_t *countdowns, uint32_t count, uint32_t run_outs, struct log_slots_result *out);

#ifdef __cplusplus
}
#endif

#endif
