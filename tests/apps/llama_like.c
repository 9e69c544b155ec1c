/* llama_like: a decode loop shaped like llama.cpp's CUDA graphs (issue 30,
 * item 8). Written for these tests; no code of that project.
 *
 * Each step evaluates one token with a batch shape (key 0, 1 or 2: 1, 2 or
 * 3 accumulate nodes) taken in runs of RUN steps. Execs are kept in an LRU
 * of two, keyed by shape; a third shape evicts the least recently used
 * (exec and graph destroyed). For the step's shape the program describes
 * every node it would launch (function, pointers, values) and compares the
 * description with the one its exec was made from:
 *   - the same: the exec is launched as it is;
 *   - different: the step is captured again (the previous graph destroyed
 *     first, as llama.cpp does), and cuGraphExecUpdate applies it; when the
 *     driver refuses the update (a step with one node more: topology), the
 *     exec is destroyed and instantiated again from the new graph.
 * The graph of a step:
 *   fill(x, 1 + pos), fill(h, 0), (1 + key) x axpy(h, x, a_j), [scale(h, h, 2)
 *   on every 7th step], copy(kv + pos * ROW, h, ROW)
 * pos (the token's position) advances every second step, so half the steps
 * launch an exec unchanged; the KV cache's row pointer moves with it.
 *
 *   --case destroy  (default) a graph is destroyed when the next capture
 *                   replaces it, the one the exec was made from included
 *   --case keep     the graphs of an exec live until it is destroyed
 *
 * --out FILE gets per step the path taken, h's first 4 KiB and the KV row
 * written; --map FILE every allocation. Prints the harness's final line;
 * any failed call exits 1.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VR_PROG "llama_like"
#include "vr_check.h"

#define N (1u << 19)   /* floats: 2 MiB buffers, VMM-backed by default */
#define BYTES ((size_t)N * 4)
#define ROW 4096u      /* bytes of one KV row */
#define KV_BYTES ((size_t)4 << 20)
#define STEPS 40
#define RUN 6          /* steps of one shape in a row */
#define LRU 2
#define MAXNODES 8

enum path { LAUNCHED, INSTANTIATED, UPDATED, REINSTANTIATED };

static CUmodule mod;
static CUstream stream;
static FILE *map;
static CUfunction f_fill, f_axpy, f_scale, f_copy;

struct node_desc {
    CUfunction f;
    uint64_t ptr[2];
    float value;
    unsigned long long n;
};

struct entry {
    int key;               /* -1: free */
    CUgraphExec exec;
    CUgraph graph;
    struct node_desc desc[MAXNODES];
    unsigned ndesc;
    unsigned long long used; /* the step it was last launched at */
    CUgraph old[STEPS];    /* --case keep: the graphs replaced, until the exec goes */
    unsigned nold;
};

static bool keep; /* --case keep */

static CUdeviceptr buffer(const char *name, size_t bytes)
{
    CUdeviceptr p;
    CK(cuMemAlloc_v2(&p, bytes));
    CK(cuMemsetD8_v2(p, 0, bytes));
    CK(cuCtxSynchronize());
    if (map)
        fprintf(map, "buf %s 0x%" PRIx64 " %zu plain\n", name, (uint64_t)p, bytes);
    return p;
}

/* The nodes step `step` of shape `key` launches. */
static unsigned describe(int key, unsigned step, CUdeviceptr x, CUdeviceptr h, CUdeviceptr kv,
                         unsigned long long n, struct node_desc *d)
{
    unsigned pos = step / 2, k = 0;
    d[k++] = (struct node_desc){f_fill, {x, 0}, 1.0f + (float)pos, n};
    d[k++] = (struct node_desc){f_fill, {h, 0}, 0.0f, n};
    for (int j = 0; j <= key; j++)
        d[k++] = (struct node_desc){f_axpy, {h, x}, 0.5f * (float)(j + 1), n};
    if (step % 7 == 6)
        d[k++] = (struct node_desc){f_scale, {h, h}, 2.0f, n};
    d[k++] = (struct node_desc){f_copy, {kv + (uint64_t)(pos % (KV_BYTES / ROW)) * ROW, h}, 0,
                                ROW};
    return k;
}

static bool same_desc(const struct entry *e, const struct node_desc *d, unsigned nd)
{
    if (e->ndesc != nd)
        return false;
    for (unsigned i = 0; i < nd; i++)
        if (e->desc[i].f != d[i].f || e->desc[i].ptr[0] != d[i].ptr[0] ||
            e->desc[i].ptr[1] != d[i].ptr[1] || e->desc[i].value != d[i].value ||
            e->desc[i].n != d[i].n)
            return false;
    return true;
}

/* The step's kernels, captured from `stream`. */
static CUgraph capture(const struct node_desc *d, unsigned nd)
{
    CK(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (unsigned i = 0; i < nd; i++) {
        /* the kernels' own argument lists (fill: out, value, n; axpy: y, x,
         * a, n; scale: out, in, s, n; copy: dst, src, n) */
        CUdeviceptr p0 = d[i].ptr[0], p1 = d[i].ptr[1];
        float v = d[i].value;
        unsigned long long n = d[i].n;
        void *kp_fill[] = {&p0, &v, &n}, *kp_two[] = {&p0, &p1, &v, &n},
             *kp_copy[] = {&p0, &p1, &n};
        void **kp = d[i].f == f_fill ? kp_fill : d[i].f == f_copy ? kp_copy : kp_two;
        CK(cuLaunchKernel(d[i].f, 4, 1, 1, 256, 1, 1, 0, stream, kp, NULL));
    }
    CUgraph g;
    CK(cuStreamEndCapture(stream, &g));
    return g;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * UINT64_C(0x100000001b3);
    return h;
}

static void drop(struct entry *e)
{
    CK(cuGraphExecDestroy(e->exec));
    CK(cuGraphDestroy(e->graph));
    for (unsigned i = 0; i < e->nold; i++)
        CK(cuGraphDestroy(e->old[i]));
    e->nold = 0;
    e->key = -1;
}

int main(int argc, char **argv)
{
    const char *out_path = NULL, *map_path = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--out"))
            out_path = argv[i + 1];
        else if (!strcmp(argv[i], "--map"))
            map_path = argv[i + 1];
        else if (!strcmp(argv[i], "--case"))
            keep = !strcmp(argv[i + 1], "keep");
    }
    alarm(30); /* a hang is a failure with a name */
    FILE *out;
    vr_probe_start(out_path, map_path, &out, &map, &mod, &stream);
    CK(cuModuleGetFunction(&f_fill, mod, "vr_fill_f32"));
    CK(cuModuleGetFunction(&f_axpy, mod, "vr_axpy_f32"));
    CK(cuModuleGetFunction(&f_scale, mod, "vr_scale_f32"));
    CK(cuModuleGetFunction(&f_copy, mod, "vr_copy_u8"));
    CUdeviceptr x = buffer("x", BYTES), h = buffer("h", BYTES), kv = buffer("kv", KV_BYTES);
    unsigned long long n = vr_extent_f32(N);

    struct entry lru[LRU];
    for (int i = 0; i < LRU; i++) {
        lru[i].key = -1;
        lru[i].nold = 0;
    }
    uint64_t sum = UINT64_C(0xcbf29ce484222325);
    unsigned long long launches = 0, counts[4] = {0};
    static unsigned char sample[ROW];
    for (unsigned step = 0; step < STEPS; step++) {
        int key = (int)((step / RUN) % 3);
        struct node_desc d[MAXNODES];
        unsigned nd = describe(key, step, x, h, kv, n, d);
        struct entry *e = NULL;
        for (int i = 0; i < LRU && !e; i++)
            if (lru[i].key == key)
                e = &lru[i];
        enum path path = LAUNCHED;
        if (!e) {
            /* a free entry, else the least recently used one */
            e = &lru[0];
            for (int i = 0; i < LRU; i++)
                if (lru[i].key < 0 || (e->key >= 0 && lru[i].used < e->used))
                    e = &lru[i];
            if (e->key >= 0)
                drop(e);
            e->graph = capture(d, nd);
            CK(cuGraphInstantiateWithFlags(&e->exec, e->graph, 0));
            e->key = key;
            path = INSTANTIATED;
        } else if (!same_desc(e, d, nd)) {
            if (keep)
                e->old[e->nold++] = e->graph;
            else
                CK(cuGraphDestroy(e->graph));
            e->graph = capture(d, nd);
            CUgraphExecUpdateResultInfo info;
            CUresult r = cuGraphExecUpdate_v2(e->exec, e->graph, &info);
            if (r == CUDA_SUCCESS) {
                path = UPDATED;
            } else if (r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) {
                CK(cuGraphExecDestroy(e->exec));
                CK(cuGraphInstantiateWithFlags(&e->exec, e->graph, 0));
                path = REINSTANTIATED;
            } else {
                vr_check_fail("cuGraphExecUpdate_v2", __FILE__, __LINE__, r);
            }
        }
        memcpy(e->desc, d, nd * sizeof *d);
        e->ndesc = nd;
        e->used = step;
        counts[path]++;
        CK(cuGraphLaunch(e->exec, stream));
        launches++;
        CK(cuStreamSynchronize(stream));
        unsigned char p = (unsigned char)path;
        sum = fnv(sum, &p, 1);
        CK(cuMemcpyDtoH_v2(sample, h, ROW));
        sum = fnv(sum, sample, ROW);
        if (out && (fwrite(&p, 1, 1, out) != 1 || fwrite(sample, 1, ROW, out) != ROW))
            return 1;
        CK(cuMemcpyDtoH_v2(sample, kv + (uint64_t)((step / 2) % (KV_BYTES / ROW)) * ROW, ROW));
        sum = fnv(sum, sample, ROW);
        if (out && fwrite(sample, 1, ROW, out) != ROW)
            return 1;
    }
    for (int i = 0; i < LRU; i++)
        if (lru[i].key >= 0)
            drop(&lru[i]);
    CK(cuMemFree_v2(kv));
    CK(cuMemFree_v2(h));
    CK(cuMemFree_v2(x));
    fprintf(stderr, "llama_like: launched %llu, instantiated %llu, updated %llu, "
                    "instantiated again %llu\n",
            counts[LAUNCHED], counts[INSTANTIATED], counts[UPDATED], counts[REINSTANTIATED]);
    printf("steps=%u launches=%llu setparams=0 checksum=%016" PRIx64 "\n", STEPS, launches, sum);
    if (out && fclose(out) != 0)
        return 1;
    if (map && fclose(map) != 0)
        return 1;
    return 0;
}
