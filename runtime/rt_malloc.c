/* Heap objects named by allocation call site (MemSpy 3: statistics per
 * source-level data object): malloc, calloc, realloc, the aligned
 * allocators, free, and C++ operator new/delete, interposed in the program
 * (the runtime is linked into the executable, so these definitions win over
 * libc's for every caller) and forwarded to glibc's own entry points.
 *
 * With no ecpi run in control an allocation costs one extra load and branch
 * (ecpi_rt_note_* returns at once). Defined in C so the runtime needs no C++
 * library; a failed throwing operator new throws std::bad_alloc through
 * libstdc++'s __throw_bad_alloc when the program has it (a C++ program
 * always does) and aborts otherwise. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt_internal.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

#define SITE() __builtin_return_address(0)
#define NOTE_ALLOC(p, n, a)                                          \
	do {                                                             \
		if (__builtin_expect(ecpi_rt_features != 0, 0))              \
			ecpi_rt_note_alloc(p, n, a, SITE());                     \
	} while (0)
#define NOTE_FREE(p)                                                 \
	do {                                                             \
		if (__builtin_expect(ecpi_rt_features != 0, 0))              \
			ecpi_rt_note_free(p);                                    \
	} while (0)

/* The runtime's own heap. What the runtime asks of libc while it runs
 * (in_runtime: pthread_getattr_np's FILE, line buffer and cpu set when a
 * thread claims its ring, whatever pthread_atfork keeps) is served from a
 * private mapping, never from the program's heap: one 4 KiB buffer carved
 * from it and freed would move every later allocation of the program by a
 * few bytes, and with them which objects straddle a cache line (a chained
 * hash table's 24-byte entries missed 22% more under ecpi than under
 * cachegrind before this). Bump allocation, never reused (the runtime
 * allocates a few KiB per thread); when the mapping is full, libc's heap. */
#define PRIVATE_HEAP_BYTES (1u << 20)
static char *private_heap;
static uint64_t private_heap_used;

void ecpi_rt_private_heap_init(void)
{
	void *m = mmap(0, PRIVATE_HEAP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m != MAP_FAILED)
		private_heap = m;
}

static int in_private_heap(const void *p)
{
	const char *c = p;
	return private_heap && c >= private_heap && c < private_heap + PRIVATE_HEAP_BYTES;
}

/* n bytes aligned to `align` (a power of two, at most 4096), the size kept
 * in the 16 bytes before them for realloc; 0 when the mapping is full. */
static void *private_alloc(size_t n, size_t align)
{
	if (!private_heap || n > PRIVATE_HEAP_BYTES || align > 4096)
		return 0;
	if (align < 16)
		align = 16;
	uint64_t need = 16 + align + ((n + 15) & ~(uint64_t)15);
	uint64_t at = __atomic_fetch_add(&private_heap_used, need, __ATOMIC_RELAXED);
	if (at + need > PRIVATE_HEAP_BYTES)
		return 0;
	uintptr_t user = ((uintptr_t)private_heap + at + 16 + align - 1) & ~(uintptr_t)(align - 1);
	((uint64_t *)user)[-1] = n;
	return (void *)user; /* a fresh anonymous mapping: already zero */
}

static int runtime_is_calling(void)
{
	return __builtin_expect(ecpi_rt_tls.in_runtime != 0, 0);
}

static void *runtime_alloc(size_t n, size_t align)
{
	void *p = private_alloc(n, align);
	if (p)
		return p;
	return align <= 16 ? __libc_malloc(n) : __libc_memalign(align, n);
}

void *malloc(size_t n)
{
	if (runtime_is_calling())
		return runtime_alloc(n, 16);
	void *p = __libc_malloc(n);
	NOTE_ALLOC(p, n, ECPI_RT_ALLOC_MALLOC);
	return p;
}

void *calloc(size_t count, size_t n)
{
	if (runtime_is_calling()) {
		if (n && count > SIZE_MAX / n)
			return 0;
		void *p = private_alloc(count * n, 16);
		return p ? p : __libc_calloc(count, n);
	}
	void *p = __libc_calloc(count, n);
	NOTE_ALLOC(p, (uint64_t)count * n, ECPI_RT_ALLOC_CALLOC);
	return p;
}

static void *private_realloc(void *old, size_t n)
{
	void *p = runtime_alloc(n, 16);
	if (p && old) {
		uint64_t had = ((uint64_t *)old)[-1];
		memcpy(p, old, had < n ? had : n);
	}
	return p;
}

void *realloc(void *old, size_t n)
{
	if (in_private_heap(old) || (runtime_is_calling() && !old))
		return private_realloc(old, n);
	void *p = __libc_realloc(old, n);
	if (p || n == 0)
		NOTE_FREE(old);
	NOTE_ALLOC(p, n, ECPI_RT_ALLOC_REALLOC);
	return p;
}

void free(void *p)
{
	if (in_private_heap(p))
		return;
	NOTE_FREE(p);
	__libc_free(p);
}

void *memalign(size_t align, size_t n)
{
	if (runtime_is_calling())
		return runtime_alloc(n, align);
	void *p = __libc_memalign(align, n);
	NOTE_ALLOC(p, n, ECPI_RT_ALLOC_ALIGNED);
	return p;
}

void *aligned_alloc(size_t align, size_t n)
{
	if (runtime_is_calling())
		return runtime_alloc(n, align);
	void *p = __libc_memalign(align, n);
	NOTE_ALLOC(p, n, ECPI_RT_ALLOC_ALIGNED);
	return p;
}

int posix_memalign(void **out, size_t align, size_t n)
{
	if (align < sizeof(void *) || (align & (align - 1)) != 0)
		return EINVAL;
	void *p = runtime_is_calling() ? runtime_alloc(n, align) : __libc_memalign(align, n);
	if (!p)
		return ENOMEM;
	if (!in_private_heap(p))
		NOTE_ALLOC(p, n, ECPI_RT_ALLOC_ALIGNED);
	*out = p;
	return 0;
}

static void *new_or_throw(void *p)
{
	if (p)
		return p;
	if (_ZSt17__throw_bad_allocv)
		_ZSt17__throw_bad_allocv();
	dprintf(2, "ecpi runtime: operator new: out of memory\n");
	abort();
}

/* operator new(size_t), new[](size_t), and the align_val_t variants. */
void *_Znwm(size_t n)
{
	void *p = new_or_throw(__libc_malloc(n ? n : 1));
	NOTE_ALLOC(p, n, ECPI_RT_ALLOC_NEW);
	return p;
}
void *_Znam(size_t n)
{
	void *p = new_or_throw(__libc_malloc(n ? n : 1));
	NOTE_ALLOC(p, n, ECPI_RT_ALLOC_NEW_ARRAY);
	return p;
}
void *_ZnwmSt11align_val_t(size_t n, size_t align)
{
	void *p = new_or_throw(__libc_memalign(align, n ? n : 1));
	NOTE_ALLOC(p, n, ECPI_RT_ALLOC_NEW);
	return p;
}
void *_ZnamSt11align_val_t(size_t n, size_t align)
{
	void *p = new_or_throw(__libc_memalign(align, n ? n : 1));
	NOTE_ALLOC(p, n, ECPI_RT_ALLOC_NEW_ARRAY);
	return p;
}
/* The nothrow forms: operator new(size_t, const std::nothrow_t&). */
void *_ZnwmRKSt9nothrow_t(size_t n, const void *tag)
{
	(void)tag;
	void *p = __libc_malloc(n ? n : 1);
	NOTE_ALLOC(p, n, ECPI_RT_ALLOC_NEW);
	return p;
}
void *_ZnamRKSt9nothrow_t(size_t n, const void *tag)
{
	(void)tag;
	void *p = __libc_malloc(n ? n : 1);
	NOTE_ALLOC(p, n, ECPI_RT_ALLOC_NEW_ARRAY);
	return p;
}

/* operator delete and delete[] in all their sized, aligned and nothrow forms. */
#define ECPI_RT_DELETE(name, ...)           \
	void name(void *p, ##__VA_ARGS__)       \
	{                                       \
		if (in_private_heap(p))             \
			return;                         \
		NOTE_FREE(p);                       \
		__libc_free(p);                     \
	}
ECPI_RT_DELETE(_ZdlPv)
ECPI_RT_DELETE(_ZdaPv)
ECPI_RT_DELETE(_ZdlPvm, size_t n __attribute__((unused)))
ECPI_RT_DELETE(_ZdaPvm, size_t n __attribute__((unused)))
ECPI_RT_DELETE(_ZdlPvSt11align_val_t, size_t a __attribute__((unused)))
ECPI_RT_DELETE(_ZdaPvSt11align_val_t, size_t a __attribute__((unused)))
ECPI_RT_DELETE(_ZdlPvmSt11align_val_t, size_t n __attribute__((unused)), size_t a __attribute__((unused)))
ECPI_RT_DELETE(_ZdaPvmSt11align_val_t, size_t n __attribute__((unused)), size_t a __attribute__((unused)))
ECPI_RT_DELETE(_ZdlPvRKSt9nothrow_t, const void *t __attribute__((unused)))
ECPI_RT_DELETE(_ZdaPvRKSt9nothrow_t, const void *t __attribute__((unused)))
