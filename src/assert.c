/* assert.c: the one function a failed check calls (assert.h).
 *
 * On its own, below the log: jw.c and config_text.c check their invariants
 * too, and the log is built on them. One write(2) from a stack buffer: a
 * failed check may come from any state (a lock held, the heap broken), so
 * it takes no lock, allocates nothing and does not retry a short write.
 */
#include "assert.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void vr_assert_fail(const char *expr, const char *file, int line)
{
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "varemap: assertion failed: %s at %s:%d\n", expr, file, line);
    if (n > 0)
        (void)!write(STDERR_FILENO, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    abort();
}
