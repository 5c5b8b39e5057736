/* The memory-reference callbacks clang emits with
 * -fsanitize-coverage=...,trace-loads,trace-stores (one call before each
 * load or store of 1, 2, 4, 8 or 16 bytes, with its address).
 *
 * MemSpy 4.1: outside an ON window a callback costs one decrement and a
 * branch (the countdown lives in the thread's TLS block at a fixed offset);
 * the event that ends the countdown takes the slow path with the pc of the
 * instrumented access (the callback's return address).
 *
 * These definitions are weak: a program built with `ecpi flags memtrace
 * --inline` links rt_memtrace_inline.c's as bitcode, whose strong
 * definitions prevail and are inlined into the program by the link-time
 * optimizer. */
#include "rt_internal.h"

#define ECPI_RT_MEMREF(name, type, size_log2, write)                                           \
	__attribute__((weak)) void name(type *addr)                                                \
	{                                                                                          \
		if (!ECPI_RT_MEMREF_NEEDS_SLOW(ecpi_rt_tls, addr))                                     \
			return;                                                                            \
		ecpi_rt_memref_slow((uint64_t)(uintptr_t)addr, size_log2, write,                       \
		                    (uint64_t)(uintptr_t)__builtin_return_address(0));                 \
	}

ECPI_RT_MEMREF(__sanitizer_cov_load1, uint8_t, 0, 0)
ECPI_RT_MEMREF(__sanitizer_cov_load2, uint16_t, 1, 0)
ECPI_RT_MEMREF(__sanitizer_cov_load4, uint32_t, 2, 0)
ECPI_RT_MEMREF(__sanitizer_cov_load8, uint64_t, 3, 0)
ECPI_RT_MEMREF(__sanitizer_cov_load16, __int128, 4, 0)
ECPI_RT_MEMREF(__sanitizer_cov_store1, uint8_t, 0, 1)
ECPI_RT_MEMREF(__sanitizer_cov_store2, uint16_t, 1, 1)
ECPI_RT_MEMREF(__sanitizer_cov_store4, uint32_t, 2, 1)
ECPI_RT_MEMREF(__sanitizer_cov_store8, uint64_t, 3, 1)
ECPI_RT_MEMREF(__sanitizer_cov_store16, __int128, 4, 1)

/* clang needs a coverage mode beside trace-loads/trace-stores to emit the
 * callbacks at all; `ecpi flags memtrace` asks for inline 8-bit counters
 * (an inline increment per edge, no call). Their registration is accepted
 * and ignored (paths use trace-pc-guard: rt_paths.c). */
__attribute__((weak)) void __sanitizer_cov_8bit_counters_init(char *start, char *end)
{
	(void)start;
	(void)end;
}
__attribute__((weak)) void __sanitizer_cov_bool_flag_init(char *start, char *end)
{
	(void)start;
	(void)end;
}
__attribute__((weak)) void __sanitizer_cov_pcs_init(const uintptr_t *start, const uintptr_t *end)
{
	(void)start;
	(void)end;
}
