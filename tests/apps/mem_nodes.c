/* mem_nodes: a graph that allocates and frees its own scratch memory
 * (graph memory nodes, issue 32 item 4), replayed with SetParams and updated.
 *
 * The graph, each launch:
 *   alloc T, alloc U (N floats each; U is not freed in the graph)
 *   fill(T, v, N)                      v = 1 + step
 *   scale(X, T, s, N)                  X alternates between buffers A and B
 *   scale(U, T, 0.5, N)
 *   free T
 * After each launch U is read by a stream copy (work ordered after the
 * graph may use an allocation the graph did not free) and then freed with
 * cuMemFreeAsync, or the next launch would fail (cuda.h). Every step sets
 * fill and the first scale with cuGraphExecKernelNodeSetParams, except every
 * fourth, which changes the graph's fill node instead and updates the exec
 * from the graph (cuGraphExecUpdate): that update must reach the driver.
 *
 *   --case added      the graph built with cuGraphAddMemAllocNode/FreeNode
 *   --case captured   the graph captured from cuMemAllocAsync / launches /
 *                     cuMemFreeAsync; every fourth step it is captured
 *                     again and the exec updated from the new graph, or
 *                     instantiated again when the update is refused
 *
 * At the end the graph memory footprint (cuDeviceGetGraphMemAttribute)
 * before and after the exec's destruction and cuDeviceGraphMemTrim.
 * --out FILE gets X and U after every step and the footprint; --map FILE
 * the plain buffers. Prints the harness's final line; a failed call exits
 * 1, a wrong value 3.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *case_name = "";
#define VR_PROG "mem_nodes"
#define VR_PROG_DETAIL case_name
#include "vr_check.h"

#define STEPS 12
#define N 4096u

static CUmodule mod;
static CUstream stream;
static CUfunction f_fill, f_scale;
static FILE *out, *map;
static uint64_t hash = UINT64_C(0xcbf29ce484222325);

/* what the kernel nodes' parameters point at (the graph copies them) */
static CUdeviceptr t_ptr, u_ptr, x_ptr;
static float fill_v, scale_s, half = 0.5f;
static unsigned long long n_elems = N;
static void *kp_fill[] = {&t_ptr, &fill_v, &n_elems};
static void *kp_scale[] = {&x_ptr, &t_ptr, &scale_s, &n_elems};
static void *kp_half[] = {&u_ptr, &t_ptr, &half, &n_elems};

static void emit(const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        hash = (hash ^ ((const unsigned char *)p)[i]) * UINT64_C(0x100000001b3);
    if (out && fwrite(p, 1, n, out) != n) {
        perror("mem_nodes: --out");
        exit(1);
    }
}

static CUDA_KERNEL_NODE_PARAMS_v2 kparams(CUfunction f, void **kp)
{
    return (CUDA_KERNEL_NODE_PARAMS_v2){.func = f, .gridDimX = 8, .gridDimY = 1, .gridDimZ = 1,
                                        .blockDimX = 128, .blockDimY = 1, .blockDimZ = 1,
                                        .kernelParams = kp};
}

struct graph {
    CUgraph g;
    CUgraphNode fill, scale;
    CUdeviceptr t, u;
};

static CUgraphNode add_alloc(CUgraph g, const CUgraphNode *dep, size_t ndep, CUdeviceptr *p)
{
    CUDA_MEM_ALLOC_NODE_PARAMS a;
    memset(&a, 0, sizeof a);
    a.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    a.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.poolProps.location.id = 0;
    a.bytesize = N * sizeof(float);
    CUgraphNode nd;
    CK(cuGraphAddMemAllocNode(&nd, g, dep, ndep, &a));
    *p = a.dptr;
    return nd;
}

static void build_added(struct graph *gr)
{
    CK(cuGraphCreate(&gr->g, 0));
    CUgraphNode at = add_alloc(gr->g, NULL, 0, &gr->t);
    CUgraphNode au = add_alloc(gr->g, &at, 1, &gr->u);
    t_ptr = gr->t;
    u_ptr = gr->u;
    CUDA_KERNEL_NODE_PARAMS_v2 p = kparams(f_fill, kp_fill);
    CK(cuGraphAddKernelNode_v2(&gr->fill, gr->g, &au, 1, &p));
    p = kparams(f_scale, kp_scale);
    CK(cuGraphAddKernelNode_v2(&gr->scale, gr->g, &gr->fill, 1, &p));
    CUgraphNode nh;
    p = kparams(f_scale, kp_half);
    CK(cuGraphAddKernelNode_v2(&nh, gr->g, &gr->scale, 1, &p));
    CUgraphNode nf;
    CK(cuGraphAddMemFreeNode(&nf, gr->g, &nh, 1, gr->t));
}

static void launch_in(CUfunction f, void **kp)
{
    CK(cuLaunchKernel(f, 8, 1, 1, 128, 1, 1, 0, stream, kp, NULL));
}

static void build_captured(struct graph *gr)
{
    CK(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuMemAllocAsync(&gr->t, N * sizeof(float), stream));
    CK(cuMemAllocAsync(&gr->u, N * sizeof(float), stream));
    t_ptr = gr->t;
    u_ptr = gr->u;
    launch_in(f_fill, kp_fill);
    launch_in(f_scale, kp_scale);
    launch_in(f_scale, kp_half);
    CK(cuMemFreeAsync(gr->t, stream));
    CK(cuStreamEndCapture(stream, &gr->g));
    /* the kernel nodes in the order captured: fill, scale, half */
    size_t n = 0;
    CK(cuGraphGetNodes(gr->g, NULL, &n));
    CUgraphNode *nodes = calloc(n, sizeof *nodes);
    if (!nodes)
        exit(1);
    CK(cuGraphGetNodes(gr->g, nodes, &n));
    unsigned k = 0, allocs = 0, frees = 0;
    for (size_t i = 0; i < n; i++) {
        CUgraphNodeType t;
        CK(cuGraphNodeGetType(nodes[i], &t));
        allocs += t == CU_GRAPH_NODE_TYPE_MEM_ALLOC;
        frees += t == CU_GRAPH_NODE_TYPE_MEM_FREE;
        if (t != CU_GRAPH_NODE_TYPE_KERNEL)
            continue;
        if (k == 0)
            gr->fill = nodes[i];
        else if (k == 1)
            gr->scale = nodes[i];
        k++;
    }
    free(nodes);
    if (k != 3 || allocs != 2 || frees != 1) {
        fprintf(stderr, "mem_nodes captured: %u kernels, %u allocs, %u frees captured\n", k,
                allocs, frees);
        exit(3);
    }
}

static CUdeviceptr buffer(const char *name)
{
    CUdeviceptr p;
    CK(cuMemAlloc_v2(&p, N * sizeof(float)));
    CK(cuMemsetD8_v2(p, 0, N * sizeof(float)));
    CK(cuCtxSynchronize());
    if (map)
        fprintf(map, "buf %s 0x%" PRIx64 " %zu plain\n", name, (uint64_t)p, N * sizeof(float));
    return p;
}

static cuuint64_t footprint(CUgraphMem_attribute a)
{
    cuuint64_t v;
    CK(cuDeviceGetGraphMemAttribute(0, a, &v));
    emit(&v, sizeof v);
    return v;
}

static int check(const float *v, float want, const char *what, unsigned step)
{
    for (unsigned i = 0; i < N; i++)
        if (v[i] != want) {
            fprintf(stderr, "mem_nodes %s: step %u: %s[%u] = %g, want %g\n", case_name, step,
                    what, i, (double)v[i], (double)want);
            return 3;
        }
    return 0;
}

static int run(bool captured)
{
    CK(cuModuleGetFunction(&f_fill, mod, "vr_fill_f32"));
    CK(cuModuleGetFunction(&f_scale, mod, "vr_scale_f32"));
    CUdeviceptr a = buffer("a"), b = buffer("b");
    x_ptr = a;
    struct graph gr;
    if (captured)
        build_captured(&gr);
    else
        build_added(&gr);
    CUgraphExec ex;
    CK(cuGraphInstantiateWithFlags(&ex, gr.g, 0));
    unsigned long long launches = 0, setparams = 0;
    static float xs[N], us[N];
    for (unsigned step = 0; step < STEPS; step++) {
        fill_v = 1.0f + (float)step;
        scale_s = 2.0f + (float)(step % 3);
        x_ptr = step & 1 ? b : a;
        t_ptr = gr.t;
        u_ptr = gr.u;
        if (step % 4 != 3) {
            CUDA_KERNEL_NODE_PARAMS_v2 p = kparams(f_fill, kp_fill);
            CK(cuGraphExecKernelNodeSetParams_v2(ex, gr.fill, &p));
            p = kparams(f_scale, kp_scale);
            CK(cuGraphExecKernelNodeSetParams_v2(ex, gr.scale, &p));
            setparams += 2;
        } else if (!captured) {
            CUDA_KERNEL_NODE_PARAMS_v2 p = kparams(f_fill, kp_fill);
            CK(cuGraphKernelNodeSetParams_v2(gr.fill, &p));
            p = kparams(f_scale, kp_scale);
            CK(cuGraphKernelNodeSetParams_v2(gr.scale, &p));
            CUgraphExecUpdateResultInfo info;
            CK(cuGraphExecUpdate_v2(ex, gr.g, &info));
        } else {
            struct graph ng;
            build_captured(&ng);
            CUgraphExecUpdateResultInfo info;
            CUresult r = cuGraphExecUpdate_v2(ex, ng.g, &info);
            /* allocation nodes at other addresses: an exec that cannot take
             * them is instantiated again (both are answers cuda.h allows) */
            if (r != CUDA_SUCCESS) {
                CK(cuGraphExecDestroy(ex));
                CK(cuGraphInstantiateWithFlags(&ex, ng.g, 0));
                CK(cuGraphDestroy(gr.g));
                gr = ng;
            } else {
                CK(cuGraphDestroy(ng.g));
            }
        }
        CK(cuGraphLaunch(ex, stream));
        launches++;
        CK(cuMemcpyDtoHAsync_v2(us, gr.u, sizeof us, stream));
        CK(cuMemFreeAsync(gr.u, stream));
        CK(cuStreamSynchronize(stream));
        CK(cuMemcpyDtoH_v2(xs, x_ptr, sizeof xs));
        emit(xs, sizeof xs);
        emit(us, sizeof us);
        int rc = check(xs, fill_v * scale_s, "X", step);
        if (!rc)
            rc = check(us, fill_v * 0.5f, "U", step);
        if (rc)
            return rc;
    }
    cuuint64_t used = footprint(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
    footprint(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
    CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(gr.g));
    footprint(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
    CK(cuDeviceGraphMemTrim(0));
    cuuint64_t left = footprint(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
    if (used == 0 || left != 0) {
        fprintf(stderr, "mem_nodes %s: graph memory used %llu before, %llu reserved after trim\n",
                case_name, (unsigned long long)used, (unsigned long long)left);
        return 3;
    }
    CK(cuMemFree_v2(a));
    CK(cuMemFree_v2(b));
    printf("steps=%u launches=%llu setparams=%llu checksum=%016" PRIx64 "\n", STEPS, launches,
           setparams, hash);
    return 0;
}

int main(int argc, char **argv)
{
    const char *out_path = NULL, *map_path = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--case"))
            case_name = argv[i + 1];
        else if (!strcmp(argv[i], "--out"))
            out_path = argv[i + 1];
        else if (!strcmp(argv[i], "--map"))
            map_path = argv[i + 1];
    }
    bool captured = !strcmp(case_name, "captured");
    if (!captured && strcmp(case_name, "added")) {
        fprintf(stderr, "usage: mem_nodes --case added|captured [--out FILE] [--map FILE]\n");
        return 2;
    }
    alarm(30); /* a hang is a failure with a name */
    vr_probe_start(out_path, map_path, &out, &map, &mod, &stream);
    int rc = run(captured);
    if (out && fclose(out) != 0)
        rc = 1;
    if (map && fclose(map) != 0)
        rc = 1;
    return rc;
}
