/* The block-entry callbacks clang emits with
 * -fsanitize-coverage=bb,no-prune,trace-pc-guard (a call at the start of
 * every basic block of the IR; `ecpi flags paths`).
 *
 * VPP 4 samples paths in bursts: outside a burst a callback costs one
 * decrement and a branch (the path sampler's countdown, in the thread's
 * TLS block at a fixed offset); inside one every block entry is recorded
 * with its return address and a time stamp (ecpi_rt_block_slow). The guard
 * itself is not used: the return address names the block.
 *
 * Both definitions are weak: a program built with `ecpi flags paths
 * --inline` links rt_paths_inline.c's as bitcode, which log every entry
 * and time spans (rt_spans.c). */
#include "rt_internal.h"

__attribute__((weak)) void __sanitizer_cov_trace_pc_guard(uint32_t *guard)
{
	(void)guard;
	if (__builtin_expect(--ecpi_rt_tls.path_sampler.countdown != 0, 1))
		return;
	ecpi_rt_block_slow((uint64_t)(uintptr_t)__builtin_return_address(0));
}

/* Called once per instrumented module with its guards; they keep their
 * zero values (the callback does not read them). */
__attribute__((weak)) void __sanitizer_cov_trace_pc_guard_init(uint32_t *start, uint32_t *stop)
{
	(void)start;
	(void)stop;
}
