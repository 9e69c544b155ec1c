/* capture_mem: one thread holds a CU_STREAM_CAPTURE_MODE_GLOBAL capture
 * while another allocates or frees 2 MiB (VMM-backed under the shim):
 *   capture_mem alloc   the other thread, in global mode, calls cuMemAlloc:
 *                       the driver refuses it and invalidates the capture
 *                       (measured on an H200), though the VMM calls that
 *                       would serve it under the shim are allowed;
 *   capture_mem free    the other thread, relaxed, launches a kernel that
 *                       reads a buffer and frees the buffer at once: the
 *                       driver allows it (measured), waiting for the
 *                       kernel; a cuCtxSynchronize of the shim's would be
 *                       refused and invalidate the capture.
 * Prints each call's answer, the capture's end and the bytes computed
 * (issue: capture_global lines of driver_probe on an H200).
 */
#undef __CUDA_API_VERSION_INTERNAL
#define VR_PROG "capture_mem"
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "vr_check.h"
#include "two_threads.h"

static CUcontext ctx;
static CUfunction fill, scale;
static bool freeing;
/* phase (two_threads.h): 1: worker set up; 2: capturing; 3: worker done; 4: capture over */
static unsigned long long n = N;

static void grid(CUfunction f, CUstream s, void **args)
{
    CK(cuLaunchKernel(f, 64, 1, 1, 128, 1, 1, 0, s, args, NULL));
}

static void *capturer(void *arg)
{
    (void)arg;
    CK(cuCtxSetCurrent(ctx));
    CUstream cs;
    CUdeviceptr a;
    CK(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&a, BYTES));
    float three = 3.0f;
    void *fa[] = { &a, &three, &n };
    wait_phase(1);
    CK(cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_GLOBAL));
    grid(fill, cs, fa);
    set_phase(2);
    wait_phase(3);
    CUgraph g = NULL;
    CUresult end = cuStreamEndCapture(cs, &g);
    printf("capture.end %s\n", vr_err_name(end));
    if (end == CUDA_SUCCESS) {
        CUgraphExec e;
        CK(cuGraphInstantiateWithFlags(&e, g, 0));
        CK(cuGraphLaunch(e, cs));
        CK(cuStreamSynchronize(cs));
        printf("capture.sum %016llx\n", (unsigned long long)checksum(a));
        CK(cuGraphExecDestroy(e));
        CK(cuGraphDestroy(g));
    }
    CK(cuMemFree(a));
    CK(cuStreamDestroy(cs));
    return NULL;
}

static void say(const char *what, CUresult r)
{
    printf("worker.%s %s\n", what, vr_err_name(r));
}

static void *worker(void *arg)
{
    (void)arg;
    CK(cuCtxSetCurrent(ctx));
    CUstream sw;
    CUdeviceptr x, y, p = 0;
    CK(cuStreamCreate(&sw, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&x, BYTES));
    CK(cuMemAlloc(&y, BYTES));
    float one = 1.0f, two = 2.0f;
    void *fx[] = { &x, &one, &n }, *sy[] = { &y, &x, &two, &n };
    grid(fill, sw, fx);
    CK(cuStreamSynchronize(sw));
    set_phase(1);

    wait_phase(2);
    CUresult freed = CUDA_ERROR_NOT_READY;
    if (freeing) {
        CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
        say("exchange.relaxed", cuThreadExchangeStreamCaptureMode(&mode));
        /* y = 2 * x, still running when x is freed */
        say("launch_kernel", cuLaunchKernel(scale, 64, 1, 1, 128, 1, 1, 0, sw, sy, NULL));
        freed = cuMemFree(x);
        say("relaxed.mem_free", freed);
        say("exchange.back", cuThreadExchangeStreamCaptureMode(&mode));
    } else {
        CUresult r = cuMemAlloc(&p, BYTES);
        say("mem_alloc", r);
        if (r != CUDA_SUCCESS)
            p = 0;
    }
    set_phase(3);

    wait_phase(4);
    CK(cuStreamSynchronize(sw));
    if (!freeing)
        grid(scale, sw, sy);
    if (p) {
        void *fp[] = { &p, &two, &n };
        grid(fill, sw, fp);
        CK(cuStreamSynchronize(sw));
        printf("worker.p.sum %016llx\n", (unsigned long long)checksum(p));
        say("mem_free.p", cuMemFree(p));
    }
    CK(cuStreamSynchronize(sw));
    printf("worker.y.sum %016llx\n", (unsigned long long)checksum(y));
    if (freed != CUDA_SUCCESS)
        CK(cuMemFree(x));
    /* The next allocation and free after the capture: the shim's deferred
     * releases run here. */
    CUdeviceptr q;
    say("after.mem_alloc", cuMemAlloc(&q, BYTES));
    say("after.mem_free", cuMemFree(q));
    CK(cuMemFree(y));
    CK(cuStreamDestroy(sw));
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "alloc") && strcmp(argv[1], "free"))) {
        fprintf(stderr, "usage: capture_mem alloc|free\n");
        return 2;
    }
    freeing = !strcmp(argv[1], "free");
    CUmodule mod;
    vr_module_start(&mod, &ctx);
    CK(cuModuleGetFunction(&fill, mod, "vr_fill_f32"));
    CK(cuModuleGetFunction(&scale, mod, "vr_scale_f32"));
    pthread_t tc, tw;
    if (pthread_create(&tw, NULL, worker, NULL) || pthread_create(&tc, NULL, capturer, NULL)) {
        fprintf(stderr, "capture_mem: pthread_create failed\n");
        return 1;
    }
    pthread_join(tc, NULL);
    fflush(stdout);
    set_phase(4);
    pthread_join(tw, NULL);
    CK(cuModuleUnload(mod));
    return 0;
}
