/* pytorch_like: the shape of PyTorch's CUDA graphs (torch.cuda.CUDAGraph),
 * written for the e2e suite (issue 30, item 8). Static input and output
 * buffers; a forward pass captured once on a side stream, instantiated, and
 * the captured graph destroyed right away (PyTorch keeps no cudaGraph_t
 * unless asked); each step copies new data into the static input, replays
 * the exec (no SetParams: replay only) and reads the static output. With
 * --realloc K, every K steps the static buffers are reallocated (a new
 * memory pool: the old exec destroyed, the forward captured and
 * instantiated again, its graph destroyed again).
 *
 *   pytorch_like [--out FILE] [--steps S] [--layers L] [--realloc K]
 *
 * Buffers are 2 MiB (VMM-backed at the default threshold); the kernels
 * touch the first N floats. stdout: per step the output's weighted sum;
 * --out: every step's output bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VR_PROG "pytorch_like"
#include "vr_check.h"

enum { N = 2048, MAXL = 16 };
#define BYTES ((size_t)2 << 20)

static CUfunction k_scale, k_axpy;
static CUstream side;

struct model {
    unsigned layers;
    CUdeviceptr in, out, act[MAXL], w[MAXL];
    CUgraphExec exec;
    float s[MAXL], a[MAXL];
    unsigned long long n;
    void *kp[MAXL][4], *kq[MAXL][4];
};

static CUdeviceptr alloc_fill(float v)
{
    CUdeviceptr p;
    CK(cuMemAlloc_v2(&p, BYTES));
    union { float f; unsigned u; } b = {v};
    CK(cuMemsetD32_v2(p, b.u, BYTES / 4));
    return p;
}

static void launch(CUfunction f, void **kp)
{
    CK(cuLaunchKernel(f, 8, 1, 1, 256, 1, 1, 0, side, kp, NULL));
}

/* The forward pass, captured: per layer act = s * prev; act += a * w. */
static void capture(struct model *m)
{
    CK(cuStreamBeginCapture_v2(side, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    for (unsigned l = 0; l < m->layers; l++) {
        CUdeviceptr *prev = l ? &m->act[l - 1] : &m->in;
        CUdeviceptr *dst = l + 1 == m->layers ? &m->out : &m->act[l];
        m->kp[l][0] = dst;
        m->kp[l][1] = prev;
        m->kp[l][2] = &m->s[l];
        m->kp[l][3] = &m->n;
        launch(k_scale, m->kp[l]);
        m->kq[l][0] = dst;
        m->kq[l][1] = &m->w[l];
        m->kq[l][2] = &m->a[l];
        m->kq[l][3] = &m->n;
        launch(k_axpy, m->kq[l]);
    }
    CUgraph g;
    CK(cuStreamEndCapture(side, &g));
    CK(cuGraphInstantiateWithFlags(&m->exec, g, 0));
    CK(cuGraphDestroy(g)); /* as CUDAGraph does unless keep_graph */
}

static void allocate(struct model *m, unsigned gen)
{
    m->in = alloc_fill(0.0f);
    m->out = alloc_fill(0.0f);
    for (unsigned l = 0; l < m->layers; l++) {
        m->act[l] = alloc_fill(0.0f);
        m->w[l] = alloc_fill((float)((l + gen) % 5) * 0.25f);
    }
    CK(cuCtxSynchronize());
}

static void release(struct model *m)
{
    CK(cuMemFree_v2(m->in));
    CK(cuMemFree_v2(m->out));
    for (unsigned l = 0; l < m->layers; l++) {
        CK(cuMemFree_v2(m->act[l]));
        CK(cuMemFree_v2(m->w[l]));
    }
}

int main(int argc, char **argv)
{
    const char *outp = NULL;
    unsigned steps = 24, realloc_every = 0;
    struct model m;
    memset(&m, 0, sizeof m);
    m.layers = 6;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--out") && v)
            outp = argv[++i];
        else if (!strcmp(argv[i], "--steps") && v)
            steps = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && v)
            m.layers = (unsigned)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--realloc") && v)
            realloc_every = (unsigned)atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: pytorch_like [--out FILE] [--steps S] [--layers L] "
                            "[--realloc K]\n");
            return 2;
        }
    }
    if (m.layers == 0 || m.layers > MAXL || steps == 0) {
        fprintf(stderr, "pytorch_like: 1 <= --layers <= %d, --steps >= 1\n", MAXL);
        return 2;
    }
    CUmodule mod;
    vr_module_start(&mod, NULL);
    CK(cuModuleGetFunction(&k_scale, mod, "vr_scale_f32"));
    CK(cuModuleGetFunction(&k_axpy, mod, "vr_axpy_f32"));
    CUstream main_st;
    CK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&main_st, CU_STREAM_NON_BLOCKING));
    m.n = N;
    for (unsigned l = 0; l < MAXL; l++) {
        m.s[l] = 0.5f + 0.125f * (float)(l % 4);
        m.a[l] = 1.0f + (float)(l % 3);
    }
    FILE *out = outp ? fopen(outp, "wb") : NULL;
    if (outp && !out)
        return 1;
    float *h = malloc(N * sizeof *h);
    if (!h)
        return 1;
    unsigned gen = 0;
    allocate(&m, gen);
    capture(&m);
    for (unsigned s = 0; s < steps; s++) {
        if (realloc_every && s && s % realloc_every == 0) {
            /* a new pool: the old exec and buffers go, the forward is
             * captured again into new static buffers */
            CK(cuGraphExecDestroy(m.exec));
            release(&m);
            allocate(&m, ++gen);
            capture(&m);
        }
        for (size_t i = 0; i < N; i++)
            h[i] = (float)((i * 7 + s * 3) % 17) * 0.5f;
        CK(cuMemcpyHtoDAsync_v2(m.in, h, N * sizeof *h, main_st));
        CK(cuStreamSynchronize(main_st));
        CK(cuGraphLaunch(m.exec, side));
        CK(cuStreamSynchronize(side));
        CK(cuMemcpyDtoH_v2(h, m.out, N * sizeof *h));
        double sum = 0;
        for (size_t i = 0; i < N; i++)
            sum += h[i] * (double)(i % 5 + 1);
        printf("step %u sum %.3f\n", s, sum);
        if (out && fwrite(h, sizeof *h, N, out) != N)
            return 1;
    }
    CK(cuGraphExecDestroy(m.exec));
    release(&m);
    if (out && fclose(out) != 0)
        return 1;
    free(h);
    CK(cuStreamDestroy_v2(side));
    CK(cuStreamDestroy_v2(main_st));
    return 0;
}
