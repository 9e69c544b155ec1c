/* trtllm_like: the shape of TensorRT-LLM's C++ runtime with CUDA graphs,
 * written for the e2e suite (issue 30, item 8). Every step is captured
 * anew for this step's batch shape; a small cache of execs keyed by batch
 * shape (LRU, --cache C) is looked up: a hit takes the new graph through
 * cuGraphExecUpdate (instantiated again when the update fails), a miss
 * instantiates (evicting the least recently used exec); the step's graph
 * is destroyed right after, the first one too. Inputs ping-pong between two
 * buffers per shape (double buffering), a scalar (the step's position)
 * changes every step, the weights and the KV cache stay.
 *
 *   trtllm_like [--out FILE] [--steps S] [--cache C] [--layers L]
 *
 * Batch shapes 1, 2, 4, 8 in a fixed pseudo-random order; shape b has
 * L + b/2 layers (another topology) and b blocks per kernel. Buffers are
 * 2 MiB (VMM-backed at the default threshold); the kernels touch the first
 * b * 512 floats. stdout: per step the shape, how the exec was had
 * (hit / miss / reinstantiated) and the output's weighted sum; --out:
 * every step's output bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VR_PROG "trtllm_like"
#include "vr_check.h"

enum { NSHAPES = 4, MAXL = 12, MAXC = 4, PER = 512 };
#define BYTES ((size_t)2 << 20)
static const unsigned shapes[NSHAPES] = {1, 2, 4, 8};

static CUfunction k_scale, k_axpy, k_add;
static CUstream st;
static unsigned layers = 4;

struct buffers {
    CUdeviceptr in[2], out, act[MAXL];
};

static CUdeviceptr w[MAXL], kv;

/* What one step's capture reads: the argument slots stay alive until the
 * capture ends (cuLaunchKernel copies them). */
struct step_args {
    CUdeviceptr in, out, act[MAXL], w[MAXL], kv;
    float pos, s[MAXL];
    unsigned long long n;
    void *kp[3 * MAXL + 2][4];
};

static CUdeviceptr alloc_fill(float v)
{
    CUdeviceptr p;
    CK(cuMemAlloc_v2(&p, BYTES));
    union { float f; unsigned u; } b = {v};
    CK(cuMemsetD32_v2(p, b.u, BYTES / 4));
    return p;
}

static unsigned nlayers(unsigned b)
{
    return layers + b / 2;
}

static CUgraph capture(const struct buffers *bf, unsigned b, unsigned step, struct step_args *a)
{
    a->in = bf->in[step % 2];
    a->out = bf->out;
    a->kv = kv;
    a->n = (unsigned long long)b * PER;
    a->pos = 1.0f + (float)(step % 5) * 0.25f;
    unsigned L = nlayers(b), k = 0;
    CK(cuStreamBeginCapture_v2(st, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    for (unsigned l = 0; l < L; l++) {
        a->act[l] = bf->act[l];
        a->w[l] = w[l];
        a->s[l] = 0.5f + 0.125f * (float)((l + b) % 4);
        CUdeviceptr *prev = l ? &a->act[l - 1] : &a->in;
        void **p = a->kp[k++];
        p[0] = &a->act[l], p[1] = prev, p[2] = &a->s[l], p[3] = &a->n;
        CK(cuLaunchKernel(k_scale, b, 1, 1, 256, 1, 1, 0, st, p, NULL));
        p = a->kp[k++];
        p[0] = &a->act[l], p[1] = &a->w[l], p[2] = &a->pos, p[3] = &a->n;
        CK(cuLaunchKernel(k_axpy, b, 1, 1, 256, 1, 1, 0, st, p, NULL));
    }
    void **p = a->kp[k++];
    p[0] = &a->out, p[1] = &a->act[L - 1], p[2] = &a->kv, p[3] = &a->n;
    CK(cuLaunchKernel(k_add, b, 1, 1, 256, 1, 1, 0, st, p, NULL));
    CUgraph g;
    CK(cuStreamEndCapture(st, &g));
    return g;
}

struct slot {
    unsigned shape; /* 0: empty */
    CUgraphExec exec;
    unsigned used;  /* the step it was last used */
};

int main(int argc, char **argv)
{
    const char *outp = NULL;
    unsigned steps = 40, cache = 3;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--out") && v)
            outp = argv[++i];
        else if (!strcmp(argv[i], "--steps") && v)
            steps = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cache") && v)
            cache = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && v)
            layers = (unsigned)atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: trtllm_like [--out FILE] [--steps S] [--cache C] "
                            "[--layers L]\n");
            return 2;
        }
    }
    if (!steps || !cache || cache > MAXC || !layers || layers + 4 > MAXL) {
        fprintf(stderr, "trtllm_like: --steps >= 1, 1 <= --cache <= %d, 1 <= --layers <= %d\n",
                MAXC, MAXL - 4);
        return 2;
    }
    CUmodule mod;
    vr_module_start(&mod, NULL);
    CK(cuModuleGetFunction(&k_scale, mod, "vr_scale_f32"));
    CK(cuModuleGetFunction(&k_axpy, mod, "vr_axpy_f32"));
    CK(cuModuleGetFunction(&k_add, mod, "vr_add_f32"));
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    for (unsigned l = 0; l < MAXL; l++)
        w[l] = alloc_fill(0.25f * (float)(l % 3 + 1));
    kv = alloc_fill(0.75f);
    struct buffers bufs[NSHAPES];
    for (unsigned s = 0; s < NSHAPES; s++) {
        bufs[s].in[0] = alloc_fill(0.0f);
        bufs[s].in[1] = alloc_fill(0.0f);
        bufs[s].out = alloc_fill(0.0f);
        for (unsigned l = 0; l < MAXL; l++)
            bufs[s].act[l] = alloc_fill(0.0f);
    }
    CK(cuCtxSynchronize());
    FILE *out = outp ? fopen(outp, "wb") : NULL;
    if (outp && !out)
        return 1;
    float *h = malloc(8 * PER * sizeof *h);
    struct step_args *a = malloc(sizeof *a);
    if (!h || !a)
        return 1;
    struct slot execs[MAXC];
    memset(execs, 0, sizeof execs);
    unsigned long long rng = 12345;
    unsigned si = 0;
    for (unsigned step = 0; step < steps; step++) {
        /* batch shapes stay for a few steps, then change (requests come and go) */
        if (step % 3 == 0) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            si = (unsigned)(rng >> 33) % NSHAPES;
        }
        unsigned b = shapes[si];
        size_t n = (size_t)b * PER;
        for (size_t i = 0; i < n; i++)
            h[i] = (float)((i * 5 + step) % 13) * 0.5f;
        CK(cuMemcpyHtoD_v2(bufs[si].in[step % 2], h, n * sizeof *h));
        CUgraph g = capture(&bufs[si], b, step, a);
        struct slot *x = NULL, *lru = &execs[0];
        for (unsigned c = 0; c < cache; c++) {
            if (execs[c].shape == b)
                x = &execs[c];
            if (!execs[c].shape || (lru->shape && execs[c].used < lru->used))
                lru = &execs[c];
        }
        const char *how = "hit";
        if (x) {
            CUgraphExecUpdateResultInfo info;
            if (cuGraphExecUpdate_v2(x->exec, g, &info) != CUDA_SUCCESS) {
                CK(cuGraphExecDestroy(x->exec));
                CK(cuGraphInstantiateWithFlags(&x->exec, g, 0));
                how = "reinstantiated";
            }
        } else {
            x = lru;
            if (x->shape)
                CK(cuGraphExecDestroy(x->exec));
            CK(cuGraphInstantiateWithFlags(&x->exec, g, 0));
            x->shape = b;
            how = "miss";
        }
        x->used = step;
        CK(cuGraphDestroy(g)); /* right after the update or the instantiate */
        CK(cuGraphLaunch(x->exec, st));
        CK(cuStreamSynchronize(st));
        CK(cuMemcpyDtoH_v2(h, bufs[si].out, n * sizeof *h));
        double sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += h[i] * (double)(i % 7 + 1);
        printf("step %u shape %u %s sum %.3f\n", step, b, how, sum);
        if (out && fwrite(h, sizeof *h, n, out) != n)
            return 1;
    }
    for (unsigned c = 0; c < cache; c++)
        if (execs[c].shape)
            CK(cuGraphExecDestroy(execs[c].exec));
    for (unsigned l = 0; l < MAXL; l++)
        CK(cuMemFree_v2(w[l]));
    CK(cuMemFree_v2(kv));
    for (unsigned s = 0; s < NSHAPES; s++) {
        CK(cuMemFree_v2(bufs[s].in[0]));
        CK(cuMemFree_v2(bufs[s].in[1]));
        CK(cuMemFree_v2(bufs[s].out));
        for (unsigned l = 0; l < MAXL; l++)
            CK(cuMemFree_v2(bufs[s].act[l]));
    }
    if (out && fclose(out) != 0)
        return 1;
    free(h);
    free(a);
    CK(cuStreamDestroy_v2(st));
    return 0;
}
