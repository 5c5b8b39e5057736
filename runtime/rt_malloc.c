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
#include <stdlib.h>
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

void *malloc(size_t n)
{
	void *p = __libc_malloc(n);
	NOTE_ALLOC(p, n, ECPI_RT_ALLOC_MALLOC);
	return p;
}

void *calloc(size_t count, size_t n)
{
	void *p = __libc_calloc(count, n);
	NOTE_ALLOC(p, (uint64_t)count * n, ECPI_RT_ALLOC_CALLOC);
	return p;
}

void *realloc(void *old, size_t n)
{
	void *p = __libc_realloc(old, n);
	if (p || n == 0)
		NOTE_FREE(old);
	NOTE_ALLOC(p, n, ECPI_RT_ALLOC_REALLOC);
	return p;
}

void free(void *p)
{
	NOTE_FREE(p);
	__libc_free(p);
}

void *memalign(size_t align, size_t n)
{
	void *p = __libc_memalign(align, n);
	NOTE_ALLOC(p, n, ECPI_RT_ALLOC_ALIGNED);
	return p;
}

void *aligned_alloc(size_t align, size_t n)
{
	void *p = __libc_memalign(align, n);
	NOTE_ALLOC(p, n, ECPI_RT_ALLOC_ALIGNED);
	return p;
}

int posix_memalign(void **out, size_t align, size_t n)
{
	if (align < sizeof(void *) || (align & (align - 1)) != 0)
		return EINVAL;
	void *p = __libc_memalign(align, n);
	if (!p)
		return ENOMEM;
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
