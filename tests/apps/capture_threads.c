/* capture_threads: one thread holds a CU_STREAM_CAPTURE_MODE_GLOBAL capture
 * (PyTorch's default) while another replays a graph: launches it (the
 * shim's profile decision and its remaps happen there), points a node at
 * another buffer, frees memory in stream order, destroys an exec, and, in
 * relaxed mode as cuda.h requires of it, allocates and frees memory. Every
 * call the second thread makes is allowed during the capture, so the
 * capture must end successfully, with and without the shim (issue 15,
 * item 12a). Prints each call's answer and the bytes both threads computed.
 */
#undef __CUDA_API_VERSION_INTERNAL
#define VR_PROG "capture_threads"
#include <pthread.h>
#include <stdint.h>

#include "vr_check.h"
#include "two_threads.h"

static CUcontext ctx;
static CUfunction fill, scale, axpy;
/* phase (two_threads.h): 1: replayer set up; 2: capturing; 3: replayer done; 4: capture over */

/* ---- the capturing thread -------------------------------------------- */

static CUresult end_result;
static uint64_t captured_sum;

static void *capturer(void *arg)
{
    (void)arg;
    CK(cuCtxSetCurrent(ctx));
    CUstream cs;
    CUdeviceptr a, b;
    CK(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&a, BYTES));
    CK(cuMemAlloc(&b, BYTES));
    float three = 3.0f, half = 0.5f;
    unsigned long long n = N;
    void *fa[] = { &a, &three, &n }, *fb[] = { &b, &half, &n }, *ax[] = { &a, &b, &three, &n };
    wait_phase(1); /* its set-up synchronizes: not allowed during the capture */
    CK(cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuLaunchKernel(fill, 64, 1, 1, 128, 1, 1, 0, cs, fa, NULL));
    CK(cuLaunchKernel(fill, 64, 1, 1, 128, 1, 1, 0, cs, fb, NULL));
    set_phase(2);
    wait_phase(3); /* the other thread works while the capture is held */
    CUresult r = cuLaunchKernel(axpy, 64, 1, 1, 128, 1, 1, 0, cs, ax, NULL);
    printf("capture.launch_after %s\n", vr_err_name(r));
    CUgraph g = NULL;
    end_result = cuStreamEndCapture(cs, &g);
    if (end_result == CUDA_SUCCESS) {
        CUgraphExec e;
        CK(cuGraphInstantiateWithFlags(&e, g, 0));
        CK(cuGraphLaunch(e, cs));
        CK(cuStreamSynchronize(cs));
        captured_sum = checksum(a);
        CK(cuGraphExecDestroy(e));
        CK(cuGraphDestroy(g));
    }
    CK(cuMemFree(a));
    CK(cuMemFree(b));
    CK(cuStreamDestroy(cs));
    return NULL;
}

/* ---- the replaying thread --------------------------------------------- */

struct graph2 {
    CUgraph g;
    CUgraphNode fill_node, scale_node;
    CUgraphExec e;
};

static CUDA_KERNEL_NODE_PARAMS kparams(CUfunction f, void **args)
{
    return (CUDA_KERNEL_NODE_PARAMS){ .func = f, .gridDimX = 64, .gridDimY = 1, .gridDimZ = 1,
                                      .blockDimX = 128, .blockDimY = 1, .blockDimZ = 1,
                                      .kernelParams = args };
}

static CUdeviceptr x, y, z, w, gone;
static float one = 1.0f, two = 2.0f;
static unsigned long long n = N;

/* x = 1; y = 2 * x */
static void make_graph(struct graph2 *gr)
{
    void *fa[] = { &x, &one, &n }, *sa[] = { &y, &x, &two, &n };
    CUDA_KERNEL_NODE_PARAMS f = kparams(fill, fa), s = kparams(scale, sa);
    CK(cuGraphCreate(&gr->g, 0));
    CK(cuGraphAddKernelNode(&gr->fill_node, gr->g, NULL, 0, &f));
    CK(cuGraphAddKernelNode(&gr->scale_node, gr->g, &gr->fill_node, 1, &s));
    CK(cuGraphInstantiateWithFlags(&gr->e, gr->g, 0));
}

static void say(const char *what, CUresult r)
{
    printf("replay.%s %s\n", what, vr_err_name(r));
}

static void *replayer(void *arg)
{
    (void)arg;
    CK(cuCtxSetCurrent(ctx));
    CUstream sw;
    CK(cuStreamCreate(&sw, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&x, BYTES));
    CK(cuMemAlloc(&y, BYTES));
    CK(cuMemAlloc(&z, BYTES));
    CK(cuMemAlloc(&gone, BYTES));
    struct graph2 main_g, doomed;
    make_graph(&main_g);
    make_graph(&doomed);
    for (int i = 0; i < 3; i++) { /* the shim profiles these */
        CK(cuGraphLaunch(main_g.e, sw));
        CK(cuGraphLaunch(doomed.e, sw));
    }
    CK(cuStreamSynchronize(sw));
    set_phase(1);

    wait_phase(2);
    /* Global mode, the other thread capturing: only calls cuda.h allows. */
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < 4 && r == CUDA_SUCCESS; i++) /* the decision, the remap */
        r = cuGraphLaunch(main_g.e, sw);
    say("launches", r);
    for (int i = 0; i < 4 && r == CUDA_SUCCESS; i++)
        r = cuGraphLaunch(doomed.e, sw);
    say("launches.second_exec", r);
    say("exec_destroy", cuGraphExecDestroy(doomed.e)); /* torn down at a later call */
    say("mem_free_async", cuMemFreeAsync(gone, sw));   /* released at a later call */
    void *sa[] = { &z, &x, &two, &n };
    CUDA_KERNEL_NODE_PARAMS s = kparams(scale, sa);
    say("setparams.new_buffer", cuGraphExecKernelNodeSetParams(main_g.e, main_g.scale_node, &s));
    r = CUDA_SUCCESS;
    for (int i = 0; i < 4 && r == CUDA_SUCCESS; i++)
        r = cuGraphLaunch(main_g.e, sw);
    say("launches.after_update", r);
    /* Allocating and freeing is prohibited in global mode: relaxed, as
     * cuda.h asks, then global again. */
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    say("exchange.relaxed", cuThreadExchangeStreamCaptureMode(&mode));
    r = cuMemAlloc(&w, BYTES);
    say("relaxed.mem_alloc", r);
    void *fw[] = { &w, &two, &n };
    if (r == CUDA_SUCCESS)
        say("relaxed.launch_kernel", cuLaunchKernel(fill, 64, 1, 1, 128, 1, 1, 0, sw, fw, NULL));
    say("relaxed.stream_synchronize", cuStreamSynchronize(sw));
    uint64_t wsum = r == CUDA_SUCCESS ? checksum(w) : 0;
    if (r == CUDA_SUCCESS)
        say("relaxed.mem_free", cuMemFree(w));
    say("exchange.back", cuThreadExchangeStreamCaptureMode(&mode));
    printf("replay.exchange.back.was %s\n",
           mode == CU_STREAM_CAPTURE_MODE_RELAXED ? "relaxed" : "other");
    r = CUDA_SUCCESS;
    for (int i = 0; i < 4 && r == CUDA_SUCCESS; i++)
        r = cuGraphLaunch(main_g.e, sw);
    say("launches.after_free", r);
    set_phase(3);

    /* The capture may still be ending: the remaining calls wait for it. */
    wait_phase(4);
    CK(cuStreamSynchronize(sw));
    printf("replay.sums y=%016llx z=%016llx w=%016llx\n", (unsigned long long)checksum(y),
           (unsigned long long)checksum(z), (unsigned long long)wsum);
    CK(cuGraphExecDestroy(main_g.e));
    CK(cuGraphDestroy(main_g.g));
    CK(cuGraphDestroy(doomed.g));
    CK(cuMemFree(x));
    CK(cuMemFree(y));
    CK(cuMemFree(z));
    CK(cuStreamDestroy(sw));
    return NULL;
}

int main(void)
{
    CUmodule mod;
    vr_module_start(&mod, &ctx);
    CK(cuModuleGetFunction(&fill, mod, "vr_fill_f32"));
    CK(cuModuleGetFunction(&scale, mod, "vr_scale_f32"));
    CK(cuModuleGetFunction(&axpy, mod, "vr_axpy_f32"));
    pthread_t tc, tr;
    if (pthread_create(&tr, NULL, replayer, NULL) || pthread_create(&tc, NULL, capturer, NULL)) {
        fprintf(stderr, "capture_threads: pthread_create failed\n");
        return 1;
    }
    pthread_join(tc, NULL);
    printf("capture.end %s\n", vr_err_name(end_result));
    printf("capture.sum %016llx\n", (unsigned long long)captured_sum);
    fflush(stdout);
    set_phase(4);
    pthread_join(tr, NULL);
    CK(cuModuleUnload(mod));
    return end_result == CUDA_SUCCESS ? 0 : 3;
}
