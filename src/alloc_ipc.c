/* alloc_ipc: legacy IPC (cuIpcGetMemHandle / cuIpcOpenMemHandle /
 * cuIpcCloseMemHandle) on the shim's VMM-backed allocations (issue 30).
 *
 * The driver gives VMM memory no legacy IPC handle, so the shim makes its
 * own: the allocation is created with a POSIX fd handle type (alloc.c), and
 * its 64-byte handle names this process (pid and a random nonce), the
 * allocation (base and serial) and its sizes. A peer under the shim that
 * opens it connects to this process's fd server, an abstract Unix socket
 * named from the pid and the nonce, served by a thread started at the first
 * export; the server checks the peer's uid, finds the allocation still live
 * with that serial, and sends the fd (SCM_RIGHTS). The peer imports it
 * (cuMemImportFromShareableHandle), reserves, maps and sets access, and
 * returns the address of the allocation's first byte. pidfd_getfd would
 * need ptrace rights over the exporter, which yama denies a child or a
 * sibling; a socket needs none.
 *
 * Memory the shim did not back goes to the driver unchanged, as does a
 * handle without the shim's magic. A peer without the shim gets the
 * driver's own error for a handle it does not know (docs/design.md).
 *
 * The fd of an exported handle stays open until the handle is released
 * (vr_ipc_released, from alloc_release.c): the server answers from it, and
 * the cache may serve the same memory again, under another serial, which
 * makes older handles stale. Locks: IPC (lockrank.h), a leaf.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "alloc_int.h"
#include "driver.h"
#include "err.h"
#include "lock.h"
#include "lockrank.h"

static const char vr_ipc_magic[8] = {'v', 'a', 'r', 'e', 'm', 'a', 'p', 1};

/* The handle's bytes. The serial at offset 16. */
struct wire {
    char magic[8];
    int32_t pid;
    uint32_t zero0;
    uint64_t serial;
    uint64_t nonce;
    uint64_t base;
    uint64_t size;
    uint64_t padded;
    int32_t device;
    uint32_t zero1;
};
_Static_assert(sizeof(struct wire) == CU_IPC_HANDLE_SIZE, "an IPC handle is 64 bytes");

/* A peer's request and the server's answer (the fd rides with the answer). */
struct request {
    char magic[8];
    uint64_t serial, nonce, base;
};

struct exported {
    CUmemGenericAllocationHandle handle;
    int fd;
};

struct opened {
    CUcontext ctx;
    int32_t pid;
    uint64_t nonce, serial;
    CUdeviceptr va;
    size_t size, padded;
    int refs;
};

static vr_mutex lock = VR_MUTEX_INIT;
static struct exported *exps;
static size_t nexps, capexps;
static struct opened *opens;
static size_t nopens, capopens;
/* The fd server: started once per process (a forked child starts its own). */
static int listen_fd = -1;
static uint64_t nonce;
static bool serving;

static void take(void)
{
    vr_rank_take(VR_RANK_IPC);
    vr_mutex_lock(&lock);
}

static void drop(void)
{
    vr_mutex_unlock(&lock);
    vr_rank_drop(VR_RANK_IPC);
}

static bool grow(void **v, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return true;
    size_t nc = *cap ? *cap * 2 : 8;
    void *p = realloc(*v, nc * elem);
    if (!p)
        return false;
    *v = p;
    *cap = nc;
    return true;
}

static void socket_name(struct sockaddr_un *a, socklen_t *len, int32_t pid, uint64_t n)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    /* abstract: no file to clean up, gone with the process */
    int k = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "varemap-ipc-%d-%016llx", (int)pid,
                     (unsigned long long)n);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)k);
}

static void timeouts(int fd)
{
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* ---- the exporter ---- */

/* A dup of the exported fd of the live allocation `base` with `serial`,
 * or -1. */
static int fd_for(uint64_t base, uint64_t serial)
{
    struct vr_alloc_info rec;
    if (vr_alloc_find((CUdeviceptr)base, &rec) != 0 || rec.base != base || rec.serial != serial ||
        !rec.vmm)
        return -1;
    int fd = -1;
    take();
    for (size_t i = 0; i < nexps; i++)
        if (exps[i].handle == rec.handle)
            fd = fcntl(exps[i].fd, F_DUPFD_CLOEXEC, 0);
    drop();
    return fd;
}

static void serve_one(int c)
{
    struct ucred cr;
    socklen_t cl = sizeof cr;
    if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 || cr.uid != geteuid())
        return; /* another user's process gets nothing */
    timeouts(c);
    struct request q;
    if (recv(c, &q, sizeof q, MSG_WAITALL) != (ssize_t)sizeof q ||
        memcmp(q.magic, vr_ipc_magic, sizeof q.magic) != 0 || q.nonce != nonce)
        return;
    int fd = fd_for(q.base, q.serial);
    int32_t status = fd >= 0 ? 0 : -1;
    struct iovec iov = {.iov_base = &status, .iov_len = sizeof status};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        memset(&u, 0, sizeof u);
        m.msg_control = u.buf;
        m.msg_controllen = sizeof u.buf;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    }
    (void)sendmsg(c, &m, MSG_NOSIGNAL);
    if (fd >= 0)
        close(fd);
}

static void *serve(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE ||
                errno == ENOBUFS || errno == ENOMEM)
                continue;
            return NULL; /* the socket is gone (a forked child closed its copy) */
        }
        serve_one(c);
        close(c);
    }
}

/* Starts the fd server once. 0 or -errno. */
static int start_server(void)
{
    take();
    bool up = serving;
    drop();
    if (up)
        return 0;
    uint64_t n = 0;
    if (getrandom(&n, sizeof n, 0) != (ssize_t)sizeof n)
        n = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&n;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_un a;
    socklen_t len;
    socket_name(&a, &len, (int32_t)getpid(), n);
    if (bind(fd, (struct sockaddr *)&a, len) != 0 || listen(fd, 16) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    take();
    if (serving) { /* another thread won */
        drop();
        close(fd);
        return 0;
    }
    /* set before the server reads them */
    listen_fd = fd;
    nonce = n;
    pthread_t t;
    pthread_attr_t at;
    sigset_t all, old;
    sigfillset(&all);
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the program's signals are not the server's */
    int rc = pthread_create(&t, &at, serve, (void *)(intptr_t)fd);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
    serving = rc == 0;
    if (rc != 0)
        listen_fd = -1;
    drop();
    if (rc != 0)
        close(fd);
    return -rc;
}

/* The exported fd of handle h, made once. 0 or a negative code. */
static int export_fd(CUmemGenericAllocationHandle h)
{
    take();
    for (size_t i = 0; i < nexps; i++)
        if (exps[i].handle == h) {
            drop();
            return 0;
        }
    drop();
    int fd = -1;
    CUresult r = vr_real.cuMemExportToShareableHandle(&fd, h,
                                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    take();
    for (size_t i = 0; i < nexps; i++)
        if (exps[i].handle == h) { /* another thread's export won */
            drop();
            close(fd);
            return 0;
        }
    bool ok = grow((void **)&exps, &capexps, nexps, sizeof *exps);
    if (ok)
        exps[nexps++] = (struct exported){h, fd};
    drop();
    if (!ok) {
        close(fd);
        return -ENOMEM;
    }
    return 0;
}

int vr_alloc_ipc_get(CUipcMemHandle *out, CUdeviceptr dptr)
{
    struct vr_alloc_info rec;
    if (vr_reg_find_span(dptr, &rec) != 0 || !rec.vmm || dptr - rec.base >= rec.size)
        return vr_err_cu(vr_real.cuIpcGetMemHandle(out, dptr));
    if (!rec.shareable) {
        /* the device refused the handle type at cuMemCreate: not exportable */
        vr_alloc_fallback_once(FB_IPC, "cuIpcGetMemHandle",
                               "the device gives VMM memory no POSIX fd handle");
        return vr_err_cu(vr_real.cuIpcGetMemHandle(out, dptr));
    }
    CUcontext ctx;
    int rc = vr_alloc_need_context(&ctx);
    if (rc != 0)
        return rc;
    /* As the driver answers for native memory: an interior pointer's
     * handle names the allocation, and opens at its base (docs/design.md). */
    if (!out)
        return vr_err_cu(CUDA_ERROR_INVALID_VALUE);
    if (export_fd(rec.handle) != 0 || start_server() != 0) {
        /* Created without an exportable handle type: what the driver says
         * of this memory. */
        vr_alloc_fallback_once(FB_IPC, "cuIpcGetMemHandle",
                               "the allocation's memory cannot be exported");
        return vr_err_cu(vr_real.cuIpcGetMemHandle(out, dptr));
    }
    struct wire w;
    memset(&w, 0, sizeof w);
    memcpy(w.magic, vr_ipc_magic, sizeof w.magic);
    w.pid = (int32_t)getpid();
    w.serial = rec.serial;
    take();
    w.nonce = nonce;
    drop();
    w.base = rec.base;
    w.size = rec.size;
    w.padded = rec.padded;
    w.device = rec.device;
    memcpy(out, &w, sizeof w);
    return 0;
}

void vr_ipc_released(CUmemGenericAllocationHandle h)
{
    int fd = -1;
    take();
    for (size_t i = 0; i < nexps; i++)
        if (exps[i].handle == h) {
            fd = exps[i].fd;
            exps[i] = exps[--nexps];
            break;
        }
    drop();
    if (fd >= 0)
        close(fd);
}

/* ---- the peer ---- */

/* The exporter's fd for w, or -1. */
static int fetch(const struct wire *w)
{
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    struct sockaddr_un a;
    socklen_t len;
    socket_name(&a, &len, w->pid, w->nonce);
    timeouts(s);
    int fd = -1;
    if (connect(s, (struct sockaddr *)&a, len) != 0)
        goto out; /* its process is gone, or never exported */
    struct request q;
    memcpy(q.magic, vr_ipc_magic, sizeof q.magic);
    q.serial = w->serial;
    q.nonce = w->nonce;
    q.base = w->base;
    if (send(s, &q, sizeof q, MSG_NOSIGNAL) != (ssize_t)sizeof q)
        goto out;
    int32_t status = -1;
    struct iovec iov = {.iov_base = &status, .iov_len = sizeof status};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    if (recvmsg(s, &m, MSG_CMSG_CLOEXEC | MSG_WAITALL) != (ssize_t)sizeof status)
        goto out;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
        cm->cmsg_len == CMSG_LEN(sizeof(int)))
        memcpy(&fd, CMSG_DATA(cm), sizeof fd);
    if (status != 0 && fd >= 0) {
        close(fd);
        fd = -1;
    }
out:
    close(s);
    return fd;
}

static struct opened *find_open(CUcontext ctx, const struct wire *w)
{
    for (size_t i = 0; i < nopens; i++)
        if (opens[i].ctx == ctx && opens[i].pid == w->pid && opens[i].nonce == w->nonce &&
            opens[i].serial == w->serial)
            return &opens[i];
    return NULL;
}

/* Imports fd and maps it; 0 with *va, or the driver's error. */
static int map_fd(int fd, const struct wire *w, CUdeviceptr *va)
{
    CUdevice dev;
    int rc = vr_vmm_current_device(&dev);
    if (rc != 0)
        return rc == -ERANGE ? vr_err_cu(CUDA_ERROR_INVALID_VALUE) : rc;
    size_t gran = vr_alloc_granularity_for(dev);
    if (gran == 0 || w->padded % gran != 0)
        return vr_err_cu(CUDA_ERROR_INVALID_VALUE);
    CUmemGenericAllocationHandle h;
    CUresult r = vr_real.cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd,
                                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    CUdeviceptr p = 0;
    r = vr_real.cuMemAddressReserve(&p, w->padded, gran, 0, 0);
    if (r == CUDA_SUCCESS) {
        r = vr_real.cuMemMap(p, w->padded, 0, h, 0);
        if (r == CUDA_SUCCESS) {
            CUmemAccessDesc access[VR_MAX_DEVICES];
            r = vr_real.cuMemSetAccess(p, w->padded, access,
                                       vr_alloc_access_for(dev, access, VR_MAX_DEVICES));
            if (r != CUDA_SUCCESS)
                vr_real.cuMemUnmap(p, w->padded);
        }
        if (r != CUDA_SUCCESS)
            vr_real.cuMemAddressFree(p, w->padded);
    }
    vr_real.cuMemRelease(h); /* the mapping keeps the memory */
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    *va = p;
    return 0;
}

static void unmap(CUdeviceptr va, size_t padded)
{
    /* as the driver's close: after the work that may still use it */
    vr_real.cuCtxSynchronize();
    if (vr_real.cuMemUnmap(va, padded) == CUDA_SUCCESS)
        vr_real.cuMemAddressFree(va, padded);
}

int vr_alloc_ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned flags)
{
    struct wire w;
    memcpy(&w, &handle, sizeof w);
    if (memcmp(w.magic, vr_ipc_magic, sizeof w.magic) != 0)
        return vr_err_cu(vr_real.cuIpcOpenMemHandle_v2(pdptr, handle, flags));
    CUcontext ctx;
    int rc = vr_alloc_need_context(&ctx);
    if (rc != 0)
        return rc;
    if (!pdptr || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS || w.pid <= 0 || w.size == 0 ||
        w.padded < w.size)
        return vr_err_cu(CUDA_ERROR_INVALID_VALUE);
    if (w.pid == (int32_t)getpid())
        return vr_err_cu(CUDA_ERROR_INVALID_CONTEXT); /* as for the driver's own handles */
    take();
    struct opened *o = find_open(ctx, &w);
    if (o) { /* opened again by this context: the same pointer (cuda.h) */
        o->refs++;
        *pdptr = o->va;
        drop();
        return 0;
    }
    drop();
    int fd = fetch(&w);
    if (fd < 0)
        return vr_err_cu(CUDA_ERROR_INVALID_VALUE); /* stale or forged */
    CUdeviceptr va = 0;
    rc = map_fd(fd, &w, &va);
    close(fd);
    if (rc != 0)
        return rc;
    take();
    o = find_open(ctx, &w);
    if (o) { /* another thread's open won */
        o->refs++;
        *pdptr = o->va;
        drop();
        unmap(va, w.padded);
        return 0;
    }
    bool ok = grow((void **)&opens, &capopens, nopens, sizeof *opens);
    if (ok)
        opens[nopens++] = (struct opened){ctx, w.pid, w.nonce, w.serial, va, w.size, w.padded, 1};
    drop();
    if (!ok) {
        unmap(va, w.padded);
        return vr_err_cu(CUDA_ERROR_OUT_OF_MEMORY);
    }
    *pdptr = va;
    return 0;
}

int vr_alloc_ipc_close(CUdeviceptr dptr)
{
    take();
    size_t i = 0;
    while (i < nopens && opens[i].va != dptr)
        i++;
    if (i == nopens) {
        drop();
        return vr_err_cu(vr_real.cuIpcCloseMemHandle(dptr));
    }
    struct opened o = opens[i];
    if (--opens[i].refs > 0) {
        drop();
        return 0;
    }
    opens[i] = opens[--nopens];
    drop();
    unmap(o.va, o.padded);
    return 0;
}

int vr_alloc_ipc_range(CUdeviceptr p, CUdeviceptr *base, size_t *size)
{
    int found = 0;
    take();
    for (size_t i = 0; i < nopens && !found; i++)
        if (p - opens[i].va < opens[i].padded) {
            found = p - opens[i].va < opens[i].size ? 1 : -1;
            *base = opens[i].va;
            *size = opens[i].size;
        }
    drop();
    return found;
}

void vr_alloc_ipc_after_fork(void)
{
    lock = (vr_mutex)VR_MUTEX_INIT;
    /* The parent's server, exports and mappings are the parent's. */
    if (listen_fd >= 0)
        close(listen_fd);
    listen_fd = -1;
    serving = false;
    for (size_t i = 0; i < nexps; i++)
        close(exps[i].fd);
    nexps = 0;
    nopens = 0;
}
