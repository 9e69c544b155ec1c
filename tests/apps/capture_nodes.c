/* capture_nodes: what the graph recorder must get node for node (issue 30,
 * items 3 and 7).
 *
 *   capture_nodes --case zero_event [--op memset8|memset32|memcpy] [--steps S]
 *   capture_nodes --case zero_wait [--op ...] [--steps S]
 *   capture_nodes --case zero_only [--op ...] [--steps S]
 *   capture_nodes --case free_in_capture [--ptsz]
 *   capture_nodes --case launch_in_capture
 *   capture_nodes --case launch_beside_capture
 *   capture_nodes --case destroy_in_capture
 *
 * zero_event: every step captures a zero-byte async op (--op, default
 * memset8) and a scale kernel, then adds an event record node after the
 * kernel through cuGraphAddEventRecordNode, with one of two events by
 * turns; the first step's graph is instantiated, every later one applied
 * with cuGraphExecUpdate. After each launch cuEventElapsedTime from an event
 * recorded before the launch to the step's event says whether the exec
 * recorded it (an exec that kept the old event never records the new one).
 * zero_wait: the same with an event wait node (no edges) instead,
 * on an event the host records behind a gate on another stream: while
 * gated, cuStreamQuery on the launch's stream says CUDA_ERROR_NOT_READY
 * (an exec that kept the old, complete event would run through).
 * zero_only: the same without the event node (the recorder must know every
 * graph exactly). free_in_capture: a buffer freed with cuMemFreeAsync into
 * a capturing stream (an H200 refuses it, CUDA_ERROR_INVALID_VALUE, and the
 * capture goes on), the captured graph launched (its kernel reads the
 * buffer), then the buffer read back and freed for real. launch_in_capture: an exec launched
 * into a capturing stream (after launches on another stream).
 * launch_beside_capture: an exec launched on one stream while the stream
 * of its earlier launches captures a kernel (the shim must not record its
 * own event into that capture). destroy_in_capture: an exec launched six
 * times, then destroyed while the stream of its launches captures a
 * kernel (relaxed mode).
 * stdout: every answer and the values read, compared with and without the
 * shim.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VR_PROG "capture_nodes"
#include "vr_check.h"

enum { M = 256 };

CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);

static CUfunction scale;

static void zero_op(const char *op, CUdeviceptr a, CUdeviceptr b, CUstream s)
{
    if (!strcmp(op, "memset8"))
        CK(cuMemsetD8Async(a, 0, 0, s));
    else if (!strcmp(op, "memset32"))
        CK(cuMemsetD32Async(a, 0, 0, s));
    else
        CK(cuMemcpyAsync(a, b, 0, s));
}

/* node: 0 none, 1 an event record node after the kernel, 2 an event wait
 * node (a root of its own) on an event the host records behind a gate on
 * another stream: while gated, the launch is not complete. */
static int zero_steps(const char *op, unsigned steps, int node)
{
    bool event_node = node == 1, wait_node = node == 2;
    size_t n = vr_extent_f32(M);
    CUdeviceptr a = vr_buffer_f32(M, 0.0f), b = vr_buffer_f32(M, 2.0f);
    CUstream st, st2;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&st2, CU_STREAM_NON_BLOCKING));
    CUevent ev[2], start;
    CK(cuEventCreate(&ev[0], CU_EVENT_DEFAULT));
    CK(cuEventCreate(&ev[1], CU_EVENT_DEFAULT));
    CK(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CUgraphExec exec = NULL;
    CUgraph first = NULL; /* kept: the exec's nodes stay nameable */
    unsigned long long elems = n;
    for (unsigned k = 0; k < steps; k++) {
        float factor = (float)(k % 3 + 1);
        void *kp[] = {&a, &b, &factor, &elems};
        CK(cuStreamBeginCapture_v2(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
        zero_op(op, a, b, st);
        CK(cuLaunchKernel(scale, 1, 1, 1, 64, 1, 1, 0, st, kp, NULL));
        CUgraph g;
        CK(cuStreamEndCapture(st, &g));
        size_t count = 0;
        CK(cuGraphGetNodes(g, NULL, &count));
        if (event_node) {
            CUgraphNode nodes[8], rec;
            size_t got = count < 8 ? count : 8;
            CK(cuGraphGetNodes(g, nodes, &got));
            CK(cuGraphAddEventRecordNode(&rec, g, nodes, got, ev[k % 2]));
        }
        if (wait_node) { /* a root of its own: the launch completes after it */
            CUgraphNode w;
            CK(cuGraphAddEventWaitNode(&w, g, NULL, 0, ev[k % 2]));
        }
        printf("step %u: captured nodes %zu", k, count);
        if (!exec) {
            CK(cuGraphInstantiateWithFlags(&exec, g, 0));
            first = g;
        } else {
            CUgraphExecUpdateResultInfo info;
            memset(&info, 0, sizeof info);
            CUresult r = cuGraphExecUpdate_v2(exec, g, &info);
            printf(" update %s result %d", vr_err_name(r), (int)info.result);
        }
        static atomic_int released;
        if (wait_node) {
            atomic_store(&released, 0);
            CK(cuLaunchHostFunc(st2, vr_gate, &released));
            CK(cuEventRecord(ev[k % 2], st2));
        }
        CK(cuEventRecord(start, st));
        CK(cuGraphLaunch(exec, st));
        if (wait_node) {
            usleep(20000);
            printf(" gated %s", vr_err_name(cuStreamQuery(st)));
            atomic_store(&released, 1);
            CK(cuStreamSynchronize(st2));
        }
        CK(cuStreamSynchronize(st));
        if (event_node) {
            float ms;
            printf(" elapsed %s", vr_err_name(cuEventElapsedTime(&ms, start, ev[k % 2])));
        }
        printf(" a0 %.1f\n", vr_read_f32(a, 0));
        if (g != first)
            CK(cuGraphDestroy(g));
    }
    CK(cuGraphExecDestroy(exec));
    CK(cuGraphDestroy(first));
    CK(cuStreamDestroy_v2(st));
    CK(cuStreamDestroy_v2(st2));
    CK(cuMemFree_v2(a));
    CK(cuMemFree_v2(b));
    return 0;
}

/* A buffer of this size is one the shim backs with VMM memory. */
enum { BIG = 4 << 20 };

static int free_in_capture(bool ptsz)
{
    CUdeviceptr x = vr_buffer_f32(BIG / 4, 3.0f), y = vr_buffer_f32(M, 0.0f);
    CUstream st;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(cuStreamBeginCapture_v2(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUresult r = ptsz ? cuMemFreeAsync_ptsz(x, st) : cuMemFreeAsync(x, st);
    printf("free in capture: %s\n", vr_err_name(r));
    float f = 2.0f;
    unsigned long long elems = vr_extent_f32(M);
    void *kp[] = {&y, &x, &f, &elems};
    r = cuLaunchKernel(scale, 1, 1, 1, 64, 1, 1, 0, st, kp, NULL);
    printf("launch after it: %s\n", vr_err_name(r));
    CUgraph g = NULL;
    r = cuStreamEndCapture(st, &g);
    printf("end capture: %s graph %s\n", vr_err_name(r), g ? "yes" : "no");
    if (g) {
        /* The capture stands: its kernel reads x, which must be alive. */
        CUgraphExec ge;
        CK(cuGraphInstantiateWithFlags(&ge, g, 0));
        CK(cuGraphLaunch(ge, st));
        CK(cuStreamSynchronize(st));
        printf("y[0] %.1f y[63] %.1f\n", vr_read_f32(y, 0), vr_read_f32(y, 63));
        CK(cuGraphExecDestroy(ge));
        CK(cuGraphDestroy(g));
    }
    /* The buffer is the program's still: readable, then freed once. */
    printf("x[0] %.1f x[last] %.1f\n", vr_read_f32(x, 0), vr_read_f32(x, BIG / 4 - 1));
    CK(cuMemsetD32_v2(x, 0x40a00000u, BIG / 4)); /* 5.0 */
    CK(cuCtxSynchronize());
    printf("x[7] %.1f\n", vr_read_f32(x, 7));
    printf("free: %s\n", vr_err_name(cuMemFree_v2(x)));
    printf("free again: %s\n", vr_err_name(cuMemFree_v2(x)));
    CK(cuStreamDestroy_v2(st));
    CK(cuMemFree_v2(y));
    return 0;
}

/* mode 0: the exec launched into st2 while st2 captures (after launches
 * on st); mode 1: launched on st2 while st, the stream of its earlier
 * launches, captures (a kernel of its own). */
static int launch_capture(int mode)
{
    CUdeviceptr a = vr_buffer_f32(BIG / 4, 0.0f), b = vr_buffer_f32(BIG / 4, 2.0f);
    CUstream st, st2;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&st2, CU_STREAM_NON_BLOCKING));
    float factor = 3.0f;
    unsigned long long elems = vr_extent_f32(M);
    void *kp[] = {&a, &b, &factor, &elems};
    CK(cuStreamBeginCapture_v2(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuLaunchKernel(scale, 1, 1, 1, 64, 1, 1, 0, st, kp, NULL));
    CUgraph g;
    CK(cuStreamEndCapture(st, &g));
    CUgraphExec exec;
    CK(cuGraphInstantiateWithFlags(&exec, g, 0));
    for (int i = 0; i < 6; i++)
        CK(cuGraphLaunch(exec, st));
    CUstream cap = mode == 0 ? st2 : st;
    CK(cuStreamBeginCapture_v2(cap, CU_STREAM_CAPTURE_MODE_GLOBAL));
    if (mode == 1) {
        CK(cuLaunchKernel(scale, 1, 1, 1, 64, 1, 1, 0, st, kp, NULL));
        printf("launch beside capture: %s\n", vr_err_name(cuGraphLaunch(exec, st2)));
    } else {
        printf("launch in capture: %s\n", vr_err_name(cuGraphLaunch(exec, st2)));
    }
    CUgraph g2 = NULL;
    CUresult r = cuStreamEndCapture(cap, &g2);
    printf("end capture: %s graph %s\n", vr_err_name(r), g2 ? "yes" : "no");
    if (g2) {
        size_t count = 0;
        CK(cuGraphGetNodes(g2, NULL, &count));
        printf("captured nodes %zu\n", count);
        CK(cuGraphDestroy(g2));
    }
    printf("sync: %s\n", vr_err_name(cuStreamSynchronize(st2)));
    CK(cuGraphLaunch(exec, st));
    CK(cuStreamSynchronize(st));
    printf("a0 %.1f\n", vr_read_f32(a, 0));
    CK(cuGraphExecDestroy(exec));
    CK(cuGraphDestroy(g));
    CK(cuStreamDestroy_v2(st));
    CK(cuStreamDestroy_v2(st2));
    CK(cuMemFree_v2(a));
    CK(cuMemFree_v2(b));
    return 0;
}

/* An exec destroyed while the stream of its launches captures: what the
 * shim does to let its slices go must not land in that capture. */
static int destroy_in_capture(void)
{
    CUdeviceptr a = vr_buffer_f32(BIG / 4, 0.0f), b = vr_buffer_f32(BIG / 4, 2.0f);
    CUstream st;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    float factor = 3.0f;
    unsigned long long elems = vr_extent_f32(M);
    void *kp[] = {&a, &b, &factor, &elems};
    CK(cuStreamBeginCapture_v2(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuLaunchKernel(scale, 1, 1, 1, 64, 1, 1, 0, st, kp, NULL));
    CUgraph g;
    CK(cuStreamEndCapture(st, &g));
    CUgraphExec exec;
    CK(cuGraphInstantiateWithFlags(&exec, g, 0));
    for (int i = 0; i < 6; i++)
        CK(cuGraphLaunch(exec, st));
    CK(cuStreamBeginCapture_v2(st, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuLaunchKernel(scale, 1, 1, 1, 64, 1, 1, 0, st, kp, NULL));
    printf("exec destroy in capture: %s\n", vr_err_name(cuGraphExecDestroy(exec)));
    CUgraph g2 = NULL;
    CUresult r = cuStreamEndCapture(st, &g2);
    printf("end capture: %s graph %s\n", vr_err_name(r), g2 ? "yes" : "no");
    if (g2) {
        size_t count = 0;
        CK(cuGraphGetNodes(g2, NULL, &count));
        printf("captured nodes %zu\n", count);
        CK(cuGraphDestroy(g2));
    }
    CK(cuStreamSynchronize(st));
    printf("a0 %.1f\n", vr_read_f32(a, 0));
    CK(cuGraphDestroy(g));
    CK(cuStreamDestroy_v2(st));
    CK(cuMemFree_v2(a));
    CK(cuMemFree_v2(b));
    return 0;
}

int main(int argc, char **argv)
{
    const char *which = "zero_event", *op = "memset8";
    unsigned steps = 6;
    bool ptsz = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--case") && i + 1 < argc)
            which = argv[++i];
        else if (!strcmp(argv[i], "--op") && i + 1 < argc)
            op = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = (unsigned)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--ptsz"))
            ptsz = true;
        else {
            fprintf(stderr, "capture_nodes: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    char *ptx = vr_ptx_or_die(getenv("VR_PTX"));
    CK(cuInit(0));
    vr_ctx_current(0, NULL);
    CUmodule mod;
    CK(cuModuleLoadData(&mod, ptx));
    CK(cuModuleGetFunction(&scale, mod, "vr_scale_f32"));
    free(ptx);
    int rc;
    if (!strcmp(which, "zero_event"))
        rc = zero_steps(op, steps, 1);
    else if (!strcmp(which, "zero_wait"))
        rc = zero_steps(op, steps, 2);
    else if (!strcmp(which, "zero_only"))
        rc = zero_steps(op, steps, 0);
    else if (!strcmp(which, "free_in_capture"))
        rc = free_in_capture(ptsz);
    else if (!strcmp(which, "launch_in_capture"))
        rc = launch_capture(0);
    else if (!strcmp(which, "launch_beside_capture"))
        rc = launch_capture(1);
    else if (!strcmp(which, "destroy_in_capture"))
        rc = destroy_in_capture();
    else {
        fprintf(stderr, "capture_nodes: unknown case %s\n", which);
        return 2;
    }
    CK(cuModuleUnload(mod));
    printf("done\n");
    return rc;
}
