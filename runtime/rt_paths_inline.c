/* The block-entry callback for `ecpi flags paths --inline`: compiled by
 * clang to LLVM bitcode (ecpi_rt_paths_inline.o), linked with the program
 * under full link-time optimization, which inlines it at the start of
 * every basic block. Its strong definition prevails over rt_paths.c's weak
 * one.
 *
 * Every entry does the same work whether or not a span is being timed
 * (rt_spans.c): it takes an address in its block (`lea 0(%rip)`: an
 * inlined callback has no return address), stores it in the thread's log
 * at the slot the path countdown names, and decrements the countdown; the
 * entry that brings the countdown to zero calls a cold function that saves
 * every register it uses (preserve_most), so the program's code around it
 * is not changed for a call. One counter is both the log's cursor and the
 * countdown (ECPI_RT_LOG_SLOT): a block costs a byte load, the entry's
 * store and one decrement of memory (ecpi_rt_log_step), each addressed
 * from a register that holds the thread's state for the whole function.
 * The `lea` with a zero displacement is
 * also how the analysis finds the blocks that log their entries
 * (analyze/paths/branch_paths.cpp). */
#include "rt_internal.h"

__attribute__((noinline, cold, preserve_most)) void ecpi_rt_block_cold(uint64_t pc)
{
	ecpi_rt_span_slow(pc);
}

/* always_inline: the LTO inliner's cost budget runs out inside very large
 * functions (SQLite's sqlite3VdbeExec), and a call left to the out-of-line
 * copy logs the copy's own `lea`, the same address for every such block:
 * their paths were cut inside this function and ranked as its own. */
__attribute__((always_inline)) void __sanitizer_cov_trace_pc_guard(uint32_t *guard)
{
	(void)guard;
	uint64_t pc;
	/* The guard operand, unused by the instruction, makes each block's copy
	 * unique: identical copies at the start of two sibling blocks would be
	 * hoisted into their parent, and the siblings would log nothing. */
	__asm__ volatile("leaq 0(%%rip), %0" : "=r"(pc) : "m"(*guard));
	/* The thread's state through a register, not %fs:offset: the empty
	 * asm hides where the pointer comes from, so the compiler computes it
	 * once per function (the asm has no side effects: one `mov %fs:0` and
	 * one `lea`, hoisted and shared by every block) and addresses the
	 * countdown as offset(%reg). AMD's Zen forwards a store to the next
	 * load of the same base register and offset at no latency (memory
	 * renaming), which it does not do through a segment override: a chain
	 * of `addq $-1, %fs:x` took 2.1 ns a link on the AMD EPYC VM, through
	 * a register 0.3 ns. Each block's decrement waits for the last, so a
	 * loop of small blocks (bench/paths/small_blocks.c) ran 3.7x faster,
	 * SQLite 2x (docs/PATHS.md, issue 31). The compiler itself keeps a
	 * thread-local address for a whole function so under the dynamic TLS
	 * models. The price: it no longer knows that the log's stores miss
	 * the program's variables, which may cost the program a reload after
	 * a block (SQLite's code still shrank by 18%). */
	struct ecpi_rt_thread *t = &ecpi_rt_tls;
	__asm__("" : "+r"(t));
	if (__builtin_expect(ecpi_rt_log_step(t, pc) == 0, 0))
		ecpi_rt_block_cold(pc);
}

/* Called once per instrumented module with its guards, which the callback
 * does not read. */
void __sanitizer_cov_trace_pc_guard_init(uint32_t *start, uint32_t *stop)
{
	(void)start;
	(void)stop;
}
