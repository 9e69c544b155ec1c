/*
 * Device printf's buffer, one per context: kernels (on stream workers)
 * append each thread's formatted call; the calls the CUDA programming guide
 * names as flush points write it to stdout (docs/design.md says which ones
 * simcuda takes and why).
 */
#include "sim.h"

#include <stdio.h>
#include <string.h>

void sim_print_append(void *ctx, const char *text, size_t len)
{
    struct sim_ctx *c = ctx;
    pthread_mutex_lock(&c->print_mu);
    if (c->print_len + len > c->print_cap) {
        size_t nc = c->print_cap ? c->print_cap : 4096;
        while (nc < c->print_len + len)
            nc *= 2;
        char *n = sim_realloc(c->print_buf, nc);
        if (!n) { /* out of memory: this call's output is lost, as on a full FIFO */
            pthread_mutex_unlock(&c->print_mu);
            return;
        }
        c->print_buf = n;
        c->print_cap = nc;
    }
    memcpy(c->print_buf + c->print_len, text, len);
    c->print_len += len;
    pthread_mutex_unlock(&c->print_mu);
}

/* Through stdio, so the output keeps its place among the program's own
 * printf output, and flushed at once, as a flush point promises. */
void sim_print_flush(struct sim_ctx *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->print_mu);
    if (c->print_len) {
        fwrite(c->print_buf, 1, c->print_len, stdout);
        fflush(stdout);
        c->print_len = 0;
    }
    pthread_mutex_unlock(&c->print_mu);
}
