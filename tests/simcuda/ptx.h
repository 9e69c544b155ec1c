/*
 * simcuda's PTX interpreter: the interface between the module loader and
 * launches (sim_module.c, sim_graph.c, sim_stream.c) and the interpreter
 * (ptx_parse.c decodes, ptx_exec.c runs).
 *
 * Contract:
 * - ptx_module_load() decodes every `.entry` of a PTX text once, into a
 *   compact instruction array per kernel with register indices resolved:
 *   nothing is parsed when a kernel runs. A kernel that uses an instruction
 *   (or an operand form) the interpreter does not know still loads, but
 *   ptx_kernel_error() names it, and launching it must be refused.
 * - A decoded module is reference counted: the module record holds one
 *   reference, and so does every queued launch, graph node and exec node
 *   that may still run one of its kernels (ptx_kernel_ref/unref), so a
 *   module unloaded while a launch is queued stays valid until it ran.
 * - ptx_run() executes one launch: blocks one after the other on each of
 *   its workers (ptx_set_threads), each as
 *   warps of 32 lanes in lockstep with an active mask; divergent lanes run
 *   smallest program counter first, so structured code reconverges; lanes
 *   reaching `.sync` warp operations from different branches wait for each
 *   other (sm_70+); a barrier waits for every thread of the block that has
 *   not exited. A
 *   fault the GPU would raise (shared/local/param access out of bounds, a
 *   barrier only part of the block can reach, `trap`) prints one line and
 *   aborts the process, as a GPU fault kills the context; global memory is
 *   host memory and is touched directly (an unmapped page faults).
 */
#ifndef SIM_PTX_H
#define SIM_PTX_H

#include <stddef.h>
#include <stdint.h>

struct ptx_module;
struct ptx_kernel;

/* Decode text; 0, -ENOMEM, or -EINVAL for text that is not PTX at all. */
int ptx_module_load(const char *text, struct ptx_module **out);
/* Drop the loader's reference. */
void ptx_module_unref(struct ptx_module *m);
/* The module-scope .global/.const variable called name: its address in the
 * module's storage and its size. 0, or -ENOENT. */
int ptx_module_global(const struct ptx_module *m, const char *name, void **addr, size_t *size);
/* The storage of all of them (NULL, 0 when the module declares none). */
void ptx_module_storage(const struct ptx_module *m, void **base, size_t *size);
/* The decoded entry called name, or NULL. */
struct ptx_kernel *ptx_module_kernel(struct ptx_module *m, const char *name);
/* NULL when the kernel can run; else what the interpreter lacks. */
const char *ptx_kernel_error(const struct ptx_kernel *k);
const char *ptx_kernel_name(const struct ptx_kernel *k);
/* Static shared bytes the kernel declares. */
size_t ptx_kernel_static_shared(const struct ptx_kernel *k);
void ptx_kernel_ref(struct ptx_kernel *k);   /* NULL: nothing */
void ptx_kernel_unref(struct ptx_kernel *k); /* NULL: nothing */

struct ptx_launch {
    unsigned grid[3], block[3];
    unsigned shmem;              /* dynamic shared memory bytes */
    const unsigned char *args;   /* the packed parameter buffer */
    size_t argsize;
    int dev;                     /* for messages */
    /* Device printf's output, one call of one thread at a time, in the
     * order they ran; NULL: straight to stdout. */
    void (*print)(void *arg, const char *text, size_t len);
    void *print_arg;
    /* cudaGraphSetConditional(handle, value): 0, or nonzero for a handle
     * that names none (the launch faults); NULL: every call faults. */
    int (*set_cond)(uint64_t handle, uint32_t value);
};

/* Run one launch to completion. Returns the number of thread-instructions
 * executed (for the benchmark). */
uint64_t ptx_run(const struct ptx_kernel *k, const struct ptx_launch *l);

/* Worker threads ptx_run() may use for the blocks of one launch
 * (SIMCUDA_THREADS; 0: the cores online, the default). Blocks run in
 * any order across workers, as on a GPU: a kernel whose result does not
 * depend on the order of its blocks gives the same bytes. */
enum { PTX_MAX_THREADS = 64, PTX_THREADS_MIN_WORK = 4096 };
void ptx_set_threads(unsigned n);
/* How many workers a launch of k gets with n threads allowed (0: the
 * cores): one when the grid has fewer than PTX_THREADS_MIN_WORK threads or
 * one block, or when the kernel calls vprintf (its lines stay in the order
 * of one worker) or has a global atomic whose bytes depend on the order of
 * the updates (a float add, an old value read); else at most one per
 * block. */
unsigned ptx_workers(const struct ptx_kernel *k, const struct ptx_launch *l, unsigned n);

/* Launches ptx_run() executed in this process so far, and their
 * thread-instructions (SIMCUDA_STATS). */
void ptx_totals(uint64_t *launches, uint64_t *thread_instructions);

#endif
