/* lockrank: the witness behind lockrank.h, compiled in at VR_CHECK_LEVEL >= 2. */
#include "lockrank.h"

#if VR_CHECK_LEVEL >= 2
/* initial-exec: the witness runs inside hooks, where a TLS lookup that
 * allocates would recurse into the program's allocator. */
static __thread __attribute__((tls_model("initial-exec"))) unsigned held;

_Static_assert(VR_RANK_COUNT <= 32, "ranks fit one mask");

void vr_rank_take(enum vr_rank r)
{
    /* Nothing of rank r or above may be held: ranks strictly increase. */
    VR_ASSERT((held >> r) == 0);
    held |= 1u << r;
}

void vr_rank_drop(enum vr_rank r)
{
    VR_ASSERT(held & (1u << r));
    held &= ~(1u << r);
}

bool vr_rank_held(enum vr_rank r)
{
    return (held & (1u << r)) != 0;
}
#else
/* ISO C wants a translation unit to declare something. */
typedef int vr_lockrank_unused;
#endif
