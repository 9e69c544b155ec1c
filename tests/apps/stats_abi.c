/* stats_abi: varemap_get_stats called as a program built against an older,
 * smaller struct would call it: the shim must write no byte past the size
 * given. Prints "ok" and exits 0, or names what went wrong and exits 1.
 * Needs the shim (without it, says so and exits 2). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CANARY UINT64_C(0xa5a5a5a5a5a5a5a5)

int main(void)
{
    void *sym = dlsym(RTLD_DEFAULT, "varemap_get_stats");
    if (!sym) {
        fprintf(stderr, "stats_abi: no varemap_get_stats (run it under the shim)\n");
        return 2;
    }
    int (*get)(void *, size_t);
    memcpy(&get, &sym, sizeof sym);
    /* The first five counters of version 1, then memory that is not the
     * caller's struct. */
    uint64_t buf[64];
    for (size_t i = 0; i < 64; i++)
        buf[i] = CANARY;
    static const size_t sizes[] = {5 * sizeof(uint64_t), 5 * sizeof(uint64_t) + 7,
                                   sizeof(uint64_t)};
    for (size_t k = 0; k < 3; k++) {
        if (get(buf, sizes[k]) != 0) {
            fprintf(stderr, "stats_abi: size %zu refused\n", sizes[k]);
            return 1;
        }
        size_t whole = sizes[k] / sizeof(uint64_t);
        if (buf[0] == CANARY) {
            fprintf(stderr, "stats_abi: size %zu: nothing written\n", sizes[k]);
            return 1;
        }
        for (size_t i = whole; i < 64; i++)
            if (buf[i] != CANARY) {
                fprintf(stderr, "stats_abi: size %zu: word %zu written\n", sizes[k], i);
                return 1;
            }
        for (size_t i = 0; i < 64; i++)
            buf[i] = CANARY;
    }
    if (get(buf, 0) == 0 || get(NULL, sizeof buf) == 0 || buf[0] != CANARY) {
        fprintf(stderr, "stats_abi: size 0 or NULL accepted\n");
        return 1;
    }
    printf("ok\n");
    return 0;
}
