/*
 * simcuda IPC: cuIpcGetMemHandle / cuIpcOpenMemHandle / cuIpcCloseMemHandle
 * on native memory across processes, and POSIX-fd shareable handles of VMM
 * memory (cuMemExportToShareableHandle / cuMemImportFromShareableHandle).
 *
 * An exported cuMemAlloc allocation lives in a memfd (sim_mem.c moves it
 * there at its first export); its 64-byte handle names the exporter's pid,
 * the memfd's descriptor number there and the buffer id. The importer opens
 * /proc/<pid>/fd/<n> (a same-user process may: the ptrace READ check, which
 * yama leaves alone) and checks the memfd's name, so a handle whose
 * allocation was freed, or whose descriptor number now names something
 * else, is refused. VMM memory (cuMemCreate) has no legacy IPC handle:
 * cuIpcGetMemHandle refuses it with CUDA_ERROR_INVALID_VALUE, as an H200
 * does (issue 30); its shareable handle is the memfd itself.
 *
 * Assumptions where cuda.h is silent (docs/design.md lists them):
 * - cuIpcGetMemHandle of an interior pointer succeeds (an H200 does) and
 *   its handle names the allocation: the peer's open maps the allocation
 *   from its first byte (cuda.h is silent on which address it returns);
 * - a handle the driver does not know (forged, or its allocation freed, or
 *   its process gone) is CUDA_ERROR_INVALID_VALUE;
 * - a process opening its own handle gets CUDA_ERROR_INVALID_CONTEXT;
 * - cuIpcCloseMemHandle waits for the context's work before unmapping, as
 *   cuMemFree does; the exporter's cuMemFree leaves the importer's mapping
 *   alive (cuda.h: undefined behaviour; simcuda's is the harmless one).
 */
#include "sim.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char ipc_magic[8] = {'s', 'i', 'm', 'c', 'u', 'I', 'P', 'C'};

/* The handle's bytes (CU_IPC_HANDLE_SIZE). */
struct wire {
    char magic[8];
    int32_t pid, fd;
    uint64_t id, size, maplen;
    int32_t dev, zero0;
    uint64_t zero[2];
};
_Static_assert(sizeof(struct wire) == CU_IPC_HANDLE_SIZE, "an IPC handle is 64 bytes");

/* The memfd at /proc/<pid>/fd/<fd> named `want` (a prefix of the link's
 * target after "/memfd:"), opened read-write; -1 when it is not. */
static int open_named(int pid, int fd, const char *want)
{
    char path[64], link[128], expect[96];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0)
        return -1;
    link[n] = '\0';
    snprintf(expect, sizeof expect, "/memfd:%s", want);
    size_t el = strlen(expect);
    /* exactly the name: "/memfd:NAME (deleted)" */
    if (strncmp(link, expect, el) != 0 || (link[el] != '\0' && link[el] != ' '))
        return -1;
    return open(path, O_RDWR | O_CLOEXEC);
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    SIM_ENTER(cuIpcGetMemHandle);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_ipc_mem m;
    if ((r = sim_mem_ipc_export((uintptr_t)dptr, &m)) != CUDA_SUCCESS)
        return r; /* VMM memory, managed, stream-ordered, unknown */
    struct wire w;
    memset(&w, 0, sizeof w);
    memcpy(w.magic, ipc_magic, sizeof w.magic);
    w.pid = (int32_t)getpid();
    w.fd = m.fd;
    w.id = m.id;
    w.size = m.size;
    w.maplen = m.maplen;
    w.dev = m.dev;
    memcpy(pHandle, &w, sizeof w);
    return CUDA_SUCCESS;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    SIM_ENTER(cuIpcOpenMemHandle_v2);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    if (!pdptr || Flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
        return CUDA_ERROR_INVALID_VALUE;
    struct wire w;
    memcpy(&w, &handle, sizeof w);
    if (memcmp(w.magic, ipc_magic, sizeof w.magic) != 0 || w.pid <= 0 || w.fd < 0 ||
        w.size == 0 || w.maplen < w.size || w.dev < 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (w.pid == (int32_t)getpid())
        return CUDA_ERROR_INVALID_CONTEXT;
    if (sim_mem_ipc_reopen(c, w.pid, w.id, pdptr))
        return CUDA_SUCCESS;
    char name[48];
    snprintf(name, sizeof name, "%s%llu", SIM_IPC_MEMFD, (unsigned long long)w.id);
    int fd = open_named(w.pid, w.fd, name);
    if (fd < 0)
        return CUDA_ERROR_INVALID_VALUE; /* freed, its process gone, or never made */
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != w.maplen) {
        close(fd);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct sim_ipc_mem m = {.fd = fd, .id = w.id, .size = w.size, .maplen = w.maplen,
                            .dev = w.dev};
    return sim_mem_ipc_import(c, w.pid, &m, pdptr);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    SIM_ENTER(cuIpcCloseMemHandle);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    return sim_mem_ipc_close(c, (uintptr_t)dptr);
}

CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType,
                                      unsigned long long flags)
{
    SIM_ENTER(cuMemExportToShareableHandle);
    SIM_CHECK_INIT();
    if (!shareableHandle || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED; /* simcuda models POSIX fds only */
    int fd;
    CUresult r = sim_phys_export_fd(handle, &fd);
    if (r == CUDA_SUCCESS)
        memcpy(shareableHandle, &fd, sizeof fd);
    return r;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                        CUmemAllocationHandleType shHandleType)
{
    SIM_ENTER(cuMemImportFromShareableHandle);
    SIM_CHECK_INIT();
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    /* For POSIX fds the handle is the descriptor itself, cast (cuda.h). */
    int fd = (int)(intptr_t)osHandle;
    char path[48], link[128];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = fd >= 0 ? readlink(path, link, sizeof link - 1) : -1;
    if (n <= 0)
        return CUDA_ERROR_UNKNOWN; /* no such descriptor: what an H200 answers (-1) */
    link[n] = '\0';
    static const char pre[] = "/memfd:" SIM_VMM_MEMFD;
    if (strncmp(link, pre, sizeof pre - 1) != 0)
        return CUDA_ERROR_INVALID_VALUE; /* not memory a cuMemCreate exported */
    int dev = atoi(link + sizeof pre - 1);
    if (dev < 0 || dev >= sim_knob.devices)
        return CUDA_ERROR_NOT_SUPPORTED; /* "cannot support the memory" (cuda.h) */
    return sim_phys_import_fd(fd, dev, handle);
}
