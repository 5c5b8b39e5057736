/* The memory-reference callbacks for `ecpi flags memtrace --inline`:
 * compiled by clang to LLVM bitcode (ecpi_rt_inline.o), linked with the
 * program under link-time optimization, which inlines them at each load
 * and store. Their strong definitions prevail over rt_memtrace.c's weak
 * ones.
 *
 * Why: out of line, a reference outside an ON window costs a call, and the
 * caller keeps its live values out of the registers a call may clobber;
 * that was 1.2-3.4x the plain program's time on the bundled programs and
 * SQLite, most of ecpi's cost at --sample 1/10 (docs/CACHESIM.md). Inlined,
 * the OFF reference is MemSpy 4.1's "one decrement and a branch" in the
 * program's own code (`addq $-1, %fs:OFFSET; je`), and the call that ends
 * the countdown goes to a function that saves every register it uses
 * (preserve_most), so the caller need not.
 *
 * The pc: an inlined callback has no return address of its own, so the
 * cold function takes its own, which lies in the instrumented function at
 * the reference (with the reference's line: this file carries no debug
 * information, so inlined code takes the call site's). Like the out-of-line
 * callbacks' pc, it is a return address (the report looks up pc - 1). */
#include "rt_internal.h"

#define ECPI_RT_MEMREF_INFO(size_log2, write) ((size_log2) | ((write) << 3))

__attribute__((noinline, cold, preserve_most)) void ecpi_rt_memref_cold(uint64_t addr, unsigned info)
{
	uint64_t pc = (uint64_t)(uintptr_t)__builtin_return_address(0);
	if (ecpi_rt_memref_quick(&ecpi_rt_tls, ecpi_rt_memref_word(addr, info & 7, info >> 3), pc))
		return;
	ecpi_rt_memref_slow(addr, info & 7, info >> 3, pc);
}

/* always_inline: the LTO inliner's cost budget runs out inside very large
 * functions. In SQLite's inline build it left 13,767 calls to the
 * out-of-line copies, in 309 of its functions (2,114 in sqlite3VdbeExec
 * alone). Such a call costs a call, and ecpi_rt_memref_cold then takes
 * its pc inside the copy: every reference it samples is charged to
 * `__sanitizer_cov_load8` and its kin instead of the function that made
 * it. The same defect as the path-logging callback's (rt_paths_inline.c). */
#define ECPI_RT_MEMREF_INLINE(name, type, size_log2, write)                                    \
	__attribute__((always_inline)) void name(type *addr)                                       \
	{                                                                                          \
		if (!ECPI_RT_MEMREF_NEEDS_SLOW(ecpi_rt_tls, addr))                                     \
			return;                                                                            \
		ecpi_rt_memref_cold((uint64_t)(uintptr_t)addr, ECPI_RT_MEMREF_INFO(size_log2, write)); \
	}

ECPI_RT_MEMREF_INLINE(__sanitizer_cov_load1, uint8_t, 0, 0)
ECPI_RT_MEMREF_INLINE(__sanitizer_cov_load2, uint16_t, 1, 0)
ECPI_RT_MEMREF_INLINE(__sanitizer_cov_load4, uint32_t, 2, 0)
ECPI_RT_MEMREF_INLINE(__sanitizer_cov_load8, uint64_t, 3, 0)
ECPI_RT_MEMREF_INLINE(__sanitizer_cov_load16, __int128, 4, 0)
ECPI_RT_MEMREF_INLINE(__sanitizer_cov_store1, uint8_t, 0, 1)
ECPI_RT_MEMREF_INLINE(__sanitizer_cov_store2, uint16_t, 1, 1)
ECPI_RT_MEMREF_INLINE(__sanitizer_cov_store4, uint32_t, 2, 1)
ECPI_RT_MEMREF_INLINE(__sanitizer_cov_store8, uint64_t, 3, 1)
ECPI_RT_MEMREF_INLINE(__sanitizer_cov_store16, __int128, 4, 1)
