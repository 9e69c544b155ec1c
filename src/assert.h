/* assert: VR_ASSERT(cond) checks an internal invariant.
 *
 * Tiered like the standard assert: compiled in unless NDEBUG is defined
 * (meson's default buildtype debugoptimized does not define it, so the test
 * and sanitizer builds check), and forced on by -DVR_DEBUG even where NDEBUG
 * is. Switched off, the condition is not evaluated but still type-checked.
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

#if !defined(NDEBUG) || defined(VR_DEBUG)
#define VR_ASSERT_ON 1
#define VR_ASSERT(cond) \
    ((cond) ? (void)0 : vr_assert_fail(#cond, __FILE__, __LINE__))
#else
#define VR_ASSERT_ON 0
#define VR_ASSERT(cond) ((void)sizeof((cond) ? 1 : 0))
#endif

/* Defined in log.c. */
_Noreturn void vr_assert_fail(const char *expr, const char *file, int line);

#endif
