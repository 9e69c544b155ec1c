/*
 * simcuda heap: every malloc/calloc/realloc/strdup/free simcuda makes for
 * itself goes through here, so the bytes it holds can be told apart from the
 * program's and an interposer's in the same process heap (on a GPU these are
 * driver memory, not the caller's). The count is in glibc's chunk sizes
 * (usable size + one header word), the unit mallinfo2 reports, so a
 * benchmark can subtract it from mallinfo2's figure. Without glibc there is
 * no usable-size query and the count reads -1 (unknown).
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#define SIM_HEAP_COUNTED 1
#else
#define SIM_HEAP_COUNTED 0
#endif

static _Atomic long long g_heap_bytes;
/* Of those, the bytes parked in simcuda's own free lists (an exec's
 * recycled versions): how many there are follows how far the host ran
 * ahead of the streams, a matter of timing, so they are not "in use". */
static _Atomic long long g_parked_bytes;

/* malloc_usable_size only reads the chunk header, whatever its prototype says */
static long long chunk_bytes(const void *p)
{
#if SIM_HEAP_COUNTED
    return p ? (long long)(malloc_usable_size((void *)p) + sizeof(size_t)) : 0;
#else
    (void)p;
    return 0;
#endif
}

static void account(long long delta)
{
    if (delta)
        atomic_fetch_add_explicit(&g_heap_bytes, delta, memory_order_relaxed);
}

void *sim_malloc(size_t n)
{
    void *p = malloc(n);
    account(chunk_bytes(p));
    return p;
}

void *sim_calloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    account(chunk_bytes(p));
    return p;
}

void *sim_realloc(void *p, size_t n)
{
    long long before = chunk_bytes(p);
    void *q = realloc(p, n);
    if (q)
        account(chunk_bytes(q) - before);
    else if (!n) /* realloc(p, 0) may free p and return NULL */
        account(-before);
    return q;
}

char *sim_strndup(const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    char *d = sim_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

char *sim_strdup(const char *s)
{
    return sim_strndup(s, (size_t)-1);
}

void sim_free(void *p)
{
    account(-chunk_bytes(p));
    free(p);
}

long long sim_heap_chunk(const void *p)
{
    return chunk_bytes(p);
}

void sim_heap_park(long long bytes)
{
    if (bytes)
        atomic_fetch_add_explicit(&g_parked_bytes, bytes, memory_order_relaxed);
}

long long sim_heap_bytes(void)
{
    if (!SIM_HEAP_COUNTED)
        return -1;
    return atomic_load_explicit(&g_heap_bytes, memory_order_relaxed) -
           atomic_load_explicit(&g_parked_bytes, memory_order_relaxed);
}

/* Not a driver entry point but a simcuda-only query, absent from a real
 * libcuda: a program that finds it with dlsym runs on simcuda. */
__attribute__((visibility("default"))) long long simcuda_heap_bytes(void)
{
    return sim_heap_bytes();
}

/* The parked bytes simcuda_heap_bytes leaves out; mallinfo2 counts them in
 * use, so a program subtracts them from its figure too. */
__attribute__((visibility("default"))) long long simcuda_heap_parked_bytes(void)
{
    return SIM_HEAP_COUNTED ? atomic_load_explicit(&g_parked_bytes, memory_order_relaxed) : -1;
}
