/* ipc_share: a buffer shared with a second process by cuIpcGetMemHandle,
 * as PyTorch shares a CUDA tensor (torch.multiprocessing, DataLoader
 * workers; issue 30, item 6).
 *
 *   ipc_share [--case share|interior|bare|peeroff|stale|forged|freed] [PTX]
 *
 * The parent allocates A (2 MiB: VMM-backed under the shim) and B, fills A
 * with a kernel, replays a graph B = 2 * A whose graph it destroyed after
 * instantiation (PyTorch's CUDAGraph does), takes A's IPC handle and
 * starts a second process (itself, `--peer HEX N CASE`, through exec) with
 * the handle. The peer opens it, reads A, doubles it with a kernel, opens it
 * once more (the same pointer, cuda.h), closes both and once too many. The
 * parent waits, replays the graph again and prints A and B. Cases:
 *   share   the above;
 *   bare    the peer runs without LD_PRELOAD (under the shim: without it);
 *   peeroff the peer runs with VAREMAP_MODE=off (the parent as told);
 *   stale   the parent frees A before the peer opens its handle;
 *   interior the peer gets the handle of an interior pointer of A (an H200
 *           makes one): its open maps A from its first byte (docs/design.md);
 *   forged  the peer opens an all-zero handle, 64 fixed pseudo-random
 *           bytes and the handle with flags 0 (stdout), and the handle with
 *           its id bytes or its first byte changed (stderr: the answer is
 *           the layout's, which differs between a GPU's driver and the shim);
 *   freed   the parent frees A while the peer has it open (cuda.h:
 *           undefined; neither run may crash, and both give the same bytes),
 *           the two in step through pipes.
 * The peer writes its own SIMCUDA_STATS and VAREMAP_LOG (the parent's path
 * + ".peer"). stdout: the results and values of both processes, in order
 * (the parent waits for the peer), then the usual final line; compared
 * with and without the shim.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define VR_PROG "ipc_share"
static const char *which = "share";
#define VR_PROG_DETAIL which
#include "vr_check.h"

enum { BUF_BYTES = 2 << 20 };

struct kern {
    CUmodule mod;
    CUfunction fill, axpy, scale;
};

static void kern_load(struct kern *k, const char *ptx_path)
{
    char *ptx = vr_ptx_or_die(ptx_path);
    CK(cuModuleLoadData(&k->mod, ptx));
    free(ptx);
    CK(cuModuleGetFunction(&k->fill, k->mod, "vr_fill_f32"));
    CK(cuModuleGetFunction(&k->axpy, k->mod, "vr_axpy_f32"));
    CK(cuModuleGetFunction(&k->scale, k->mod, "vr_scale_f32"));
}

static void launch(CUfunction f, void **args, unsigned long long n)
{
    unsigned blocks = (unsigned)((n + 255) / 256);
    CK(cuLaunchKernel(f, blocks, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
}

/* FNV-1a over n floats of p, and two of them for the eye. */
static uint64_t show(const char *who, const char *what, CUdeviceptr p, unsigned long long n)
{
    float *h = malloc(n * sizeof *h);
    if (!h)
        exit(1);
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH_v2(h, p, n * sizeof *h));
    uint64_t x = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)h;
    for (size_t i = 0; i < n * sizeof *h; i++)
        x = (x ^ b[i]) * 1099511628211ull;
    printf("%s %s first=%g last=%g fnv=%016llx\n", who, what, (double)h[0], (double)h[n - 1],
           (unsigned long long)x);
    free(h);
    return x;
}

static void hex_of(const CUipcMemHandle *h, char *out)
{
    const unsigned char *b = (const unsigned char *)h;
    for (size_t i = 0; i < sizeof *h; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

static int handle_of(const char *hex, CUipcMemHandle *h)
{
    unsigned char *b = (unsigned char *)h;
    if (strlen(hex) != 2 * sizeof *h)
        return -1;
    for (size_t i = 0; i < sizeof *h; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        b[i] = (unsigned char)v;
    }
    return 0;
}

/* ---- the peer ---- */

/* Itself, to exec as the peer: argv[0] when it is a path (what a tool
 * running the program, valgrind say, traces), else /proc/self/exe. */
static const char *self = "/proc/self/exe";

/* The pipes of case freed: the peer says it opened A, the parent says it freed it. */
static int sync_rd = -1, sync_wr = -1;

static void say(int fd)
{
    char c = 1;
    fflush(stdout); /* the lines in the order they happened */
    if (fd >= 0 && write(fd, &c, 1) != 1)
        exit(1);
}

static void hear(int fd)
{
    char c;
    if (fd >= 0 && read(fd, &c, 1) != 1)
        exit(1);
}

static int peer(const char *hex, unsigned long long n, const char *ptx_path)
{
    CUipcMemHandle h;
    if (handle_of(hex, &h) != 0) {
        fprintf(stderr, "ipc_share peer: bad handle text\n");
        return 1;
    }
    CK(cuInit(0));
    vr_ctx_current(0, NULL);
    struct kern k;
    kern_load(&k, ptx_path);
    CUdeviceptr p = 0, q = 0;
    if (!strcmp(which, "forged")) {
        /* stdout: forgeries no driver's handle layout can take for the
         * parent's allocation (an H200 opened the handle with a byte of
         * it changed: its layout is not the shim's nor simcuda's). */
        CUipcMemHandle f;
        memset(&f, 0, sizeof f);
        CUresult r = cuIpcOpenMemHandle_v2(&p, f, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        printf("peer open zero=%s\n", vr_err_name(r));
        uint64_t x = 0x9e3779b97f4a7c15ull; /* fixed: both runs forge the same bytes */
        for (size_t i = 0; i < sizeof f.reserved; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            f.reserved[i] = (char)(x >> 56);
        }
        r = cuIpcOpenMemHandle_v2(&p, f, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        printf("peer open random=%s\n", vr_err_name(r));
        if (r == CUDA_SUCCESS)
            cuIpcCloseMemHandle(p);
        r = cuIpcOpenMemHandle_v2(&p, h, 0);
        printf("peer open flags0=%s\n", vr_err_name(r));
        /* stderr: the handle with a byte changed, whose answer depends on
         * whose layout it is (the e2e suite checks the shim's refuses). */
        f = h;
        f.reserved[16] ^= 0x5a; /* the allocation's id in the shim's and simcuda's layouts */
        r = cuIpcOpenMemHandle_v2(&p, f, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        if (r == CUDA_SUCCESS)
            cuIpcCloseMemHandle(p);
        fprintf(stderr, "ipc_share peer: open forged_id=%s\n", vr_err_name(r));
        f = h;
        f.reserved[0] ^= 0x01;
        r = cuIpcOpenMemHandle_v2(&p, f, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        if (r == CUDA_SUCCESS)
            cuIpcCloseMemHandle(p);
        fprintf(stderr, "ipc_share peer: open forged_magic=%s\n", vr_err_name(r));
        return 0;
    }
    CUresult r = cuIpcOpenMemHandle_v2(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    printf("peer open=%s\n", vr_err_name(r));
    if (r != CUDA_SUCCESS)
        return 0;
    CUdeviceptr base = 0;
    size_t size = 0;
    r = cuMemGetAddressRange_v2(&base, &size, p + 64);
    printf("peer range=%s base_ok=%d size=%zu\n", vr_err_name(r), base == p, size);
    show("peer", "A", p, n);
    if (sync_wr >= 0) {
        say(sync_wr);
        hear(sync_rd);
        show("peer", "A after the exporter's free", p, n);
    }
    float one = 1.0f;
    void *args[] = {&p, &p, &one, &n};
    launch(k.axpy, args, n); /* A = A + A */
    CK(cuCtxSynchronize());
    r = cuIpcOpenMemHandle_v2(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    printf("peer reopen=%s same=%d\n", vr_err_name(r), q == p);
    show("peer", "A'", p, n);
    printf("peer free=%s\n", vr_err_name(cuMemFree_v2(p)));
    printf("peer close=%s\n", vr_err_name(cuIpcCloseMemHandle(p)));
    if (r == CUDA_SUCCESS)
        printf("peer close2=%s\n", vr_err_name(cuIpcCloseMemHandle(q)));
    printf("peer close3=%s\n", vr_err_name(cuIpcCloseMemHandle(p)));
    return 0;
}

/* ---- the parent ---- */

/* NAME=VALUE+".peer" for the peer's own files. */
static void peer_file(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return;
    char buf[4200];
    snprintf(buf, sizeof buf, "%s.peer", v);
    setenv(name, buf, 1);
}

static int run_peer(const CUipcMemHandle *h, unsigned long long n, const char *ptx_path,
                    CUdeviceptr *a)
{
    char hex[2 * sizeof *h + 1], num[32], rd[16], wr[16];
    hex_of(h, hex);
    snprintf(num, sizeof num, "%llu", n);
    int to_peer[2] = {-1, -1}, to_parent[2] = {-1, -1};
    bool freed = !strcmp(which, "freed");
    if (freed && (pipe(to_peer) != 0 || pipe(to_parent) != 0))
        return -1;
    snprintf(rd, sizeof rd, "%d", to_peer[0]);
    snprintf(wr, sizeof wr, "%d", to_parent[1]);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        peer_file("SIMCUDA_STATS");
        peer_file("VAREMAP_LOG");
        if (!strcmp(which, "bare"))
            unsetenv("LD_PRELOAD");
        if (!strcmp(which, "peeroff"))
            setenv("VAREMAP_MODE", "off", 1);
        char *argv[] = {"ipc_share", "--case", (char *)which, "--sync", rd, wr, "--peer", hex,
                        num, (char *)(ptx_path ? ptx_path : ""), NULL};
        execv(self, argv);
        _exit(127);
    }
    if (freed) {
        close(to_peer[0]);
        close(to_parent[1]);
        hear(to_parent[0]);
        printf("parent free_while_open=%s\n", vr_err_name(cuMemFree_v2(*a)));
        fflush(stdout);
        *a = 0;
        say(to_peer[1]);
        close(to_parent[0]);
        close(to_peer[1]);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv)
{
    const char *ptx_path = getenv("VR_PTX");
    const char *peer_hex = NULL;
    if (strchr(argv[0], '/'))
        self = argv[0];
    unsigned long long peer_n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--case") && i + 1 < argc)
            which = argv[++i];
        else if (!strcmp(argv[i], "--sync") && i + 2 < argc) {
            sync_rd = atoi(argv[++i]);
            sync_wr = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--peer") && i + 2 < argc) {
            peer_hex = argv[++i];
            peer_n = strtoull(argv[++i], NULL, 0);
        } else if (*argv[i])
            ptx_path = argv[i];
    }
    alarm(120);
    if (peer_hex)
        return peer(peer_hex, peer_n, ptx_path);

    CK(cuInit(0));
    vr_ctx_current(0, NULL);
    struct kern k;
    kern_load(&k, ptx_path);
    unsigned long long n = vr_extent_f32(BUF_BYTES / sizeof(float));
    CUdeviceptr a, b;
    CK(cuMemAlloc_v2(&a, BUF_BYTES));
    CK(cuMemAlloc_v2(&b, BUF_BYTES));
    float v = 1.5f;
    void *fargs[] = {&a, &v, &n};
    launch(k.fill, fargs, n);
    float v0 = 0.0f;
    void *bargs[] = {&b, &v0, &n};
    launch(k.fill, bargs, n);

    /* B = 2 * A in a graph destroyed once instantiated */
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    float two = 2.0f;
    void *sargs[] = {&b, &a, &two, &n};
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = k.scale;
    kp.gridDimX = (unsigned)((n + 255) / 256);
    kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 256;
    kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = sargs;
    CUgraph g;
    CUgraphNode node;
    CUgraphExec x;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphAddKernelNode_v2(&node, g, NULL, 0, &kp));
    CK(cuGraphInstantiateWithFlags(&x, g, 0));
    CK(cuGraphDestroy(g));
    CK(cuCtxSynchronize());
    unsigned launches = 0;
    for (int i = 0; i < 4; i++, launches++)
        CK(cuGraphLaunch(x, s));
    CK(cuStreamSynchronize(s));
    show("parent", "A", a, n);
    show("parent", "B", b, n);

    CUipcMemHandle h;
    memset(&h, 0, sizeof h);
    CUresult r = cuIpcGetMemHandle(&h, a);
    printf("parent ipc_get=%s\n", vr_err_name(r));
    printf("parent ipc_get_interior=%s\n", vr_err_name(cuIpcGetMemHandle(&h, a + 256)));
    if (r == CUDA_SUCCESS) {
        /* again: "without adverse effects" (cuda.h); case interior sends
         * the handle of a + 256, which names the allocation */
        CK(cuIpcGetMemHandle(&h, !strcmp(which, "interior") ? a + 256 : a));
        if (!strcmp(which, "stale")) {
            CK(cuMemFree_v2(a));
            a = 0;
        }
        int st = run_peer(&h, n, ptx_path, &a);
        printf("parent peer_exit=%d\n", st);
    }
    if (a) {
        for (int i = 0; i < 4; i++, launches++)
            CK(cuGraphLaunch(x, s));
        CK(cuStreamSynchronize(s));
    }
    uint64_t sum = a ? show("parent", "A", a, n) : 0;
    sum ^= show("parent", "B", b, n);
    CK(cuGraphExecDestroy(x));
    CK(cuStreamDestroy_v2(s));
    if (a)
        CK(cuMemFree_v2(a));
    CK(cuMemFree_v2(b));
    CK(cuModuleUnload(k.mod));
    printf("steps=1 launches=%u setparams=0 checksum=%016llx\n", launches,
           (unsigned long long)sum);
    return 0;
}
