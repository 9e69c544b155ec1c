/* assert: tiered checks of internal invariants, as mimalloc's mi_assert family.
 *
 * VR_CHECK_LEVEL picks the tiers compiled in:
 *   0  none: the build `meson install` ships with NDEBUG (buildtype release);
 *   1  VR_ASSERT: cheap checks, off the absorbed hot path (the default build);
 *   2  + VR_ASSERT_INTERNAL and the lock-rank witness (lockrank.h);
 *   3  + VR_ASSERT_EXPENSIVE: whole-structure checkers (the sanitizer CI job).
 * Unset, it is 0 under NDEBUG and 1 otherwise; meson's `checks` option sets it.
 * A tier switched off does not evaluate its condition but still type-checks it.
 * A failed check prints "varemap: assertion failed: <expr> at file:line" on
 * stderr in one write, outside the warning budget, and aborts.
 *
 * This header sits where `#include <assert.h>` would find it first (src/ is
 * on the include path of the shim and its tests), so it passes the system
 * header through as well.
 */
#pragma GCC system_header
#include_next <assert.h>

#ifndef VR_ASSERT_H
#define VR_ASSERT_H

#ifndef VR_CHECK_LEVEL
#if defined(NDEBUG) && !defined(VR_DEBUG)
#define VR_CHECK_LEVEL 0
#else
#define VR_CHECK_LEVEL 1
#endif
#endif

#define VR_CHECK_(cond) ((cond) ? (void)0 : vr_assert_fail(#cond, __FILE__, __LINE__))
#define VR_UNCHECKED_(cond) ((void)sizeof((cond) ? 1 : 0))

#define VR_ASSERT_ON (VR_CHECK_LEVEL >= 1)
#if VR_CHECK_LEVEL >= 1
#define VR_ASSERT(cond) VR_CHECK_(cond)
#else
#define VR_ASSERT(cond) VR_UNCHECKED_(cond)
#endif
#if VR_CHECK_LEVEL >= 2
#define VR_ASSERT_INTERNAL(cond) VR_CHECK_(cond)
#else
#define VR_ASSERT_INTERNAL(cond) VR_UNCHECKED_(cond)
#endif
#if VR_CHECK_LEVEL >= 3
#define VR_ASSERT_EXPENSIVE(cond) VR_CHECK_(cond)
#else
#define VR_ASSERT_EXPENSIVE(cond) VR_UNCHECKED_(cond)
#endif

/* assert.c: the message in one write(2), then abort. */
_Noreturn void vr_assert_fail(const char *expr, const char *file, int line);

#endif
