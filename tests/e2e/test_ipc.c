/* Memory shared between processes (issue 30, item 6): ipc_share with and
 * without the shim. cuIpcGetMemHandle on a VMM-backed buffer must succeed
 * where it does natively, a peer under the shim must read and write the
 * same bytes, a stale or forged handle gets the driver's own error, and a
 * peer without the shim gets the driver's error for a handle it does not
 * know (the choice docs/design.md states) while the exporter runs on. */
#include <stdio.h>
#include <string.h>

#include "checks.h"

TestSuite(ipc, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

static void has_line(const struct vr_run *r, const char *line)
{
    char want[256];
    snprintf(want, sizeof want, "%s\n", line);
    cr_assert(strstr(r->proc.out.p, want), "missing '%s' in:\n%s", line, r->proc.out.p);
}

/* The peer's SIMCUDA_STATS (ipc_share writes the parent's path + ".peer"). */
static void peer_stats(const char *tag, struct vr_buf *b)
{
    char name[128];
    snprintf(name, sizeof name, "%s.stats.peer", tag);
    cr_assert(vr_read_file(vr_tmp_path(name), b), "%s: no peer stats", tag);
}

/* simcuda's "live" objects at exit: none. */
static void nothing_alive(const struct vr_buf *stats, const char *who)
{
    static const char *const kinds[] = { "mappings", "handles", "reservations", "allocations",
                                         NULL };
    for (size_t i = 0; kinds[i]; i++) {
        uint64_t n = 1;
        cr_assert(vr_json_u64(stats->p, stats->len, kinds[i], &n), "%s: no live %s", who,
                  kinds[i]);
        cr_assert_eq(n, 0, "%s: %llu %s alive at exit: %s", who, (unsigned long long)n, kinds[i],
                     stats->p);
    }
}

static void share_in_mode(const char *mode)
{
    static const char *const args[] = { "--case", "share", NULL };
    char tag[64], m[64];
    snprintf(tag, sizeof tag, "share_%s", mode);
    snprintf(m, sizeof m, "VAREMAP_MODE=%s", mode);
    struct pair p;
    pair_run_app(&p, tag, "ipc_share", args, NULL, m, NULL, 0);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p, "%s: stdout differs", mode);
    has_line(&p.shim, "parent ipc_get=CUDA_SUCCESS");
    has_line(&p.shim, "peer open=CUDA_SUCCESS");
    has_line(&p.shim, "peer reopen=CUDA_SUCCESS same=1");
    has_line(&p.shim, "parent A first=3 last=3 fnv=cc5f8ce6d14dc383");
    has_line(&p.shim, "parent B first=6 last=6 fnv=d5120ee80f0dc383");
    if (!strcmp(mode, "profiled")) {
        /* A was VMM-backed: the shim's own handle crossed, not the driver's */
        cr_assert_geq(vr_sim_calls(&p.shim.stats, "cuMemCreate"), 2);
        cr_assert_geq(vr_sim_calls(&p.shim.stats, "cuMemExportToShareableHandle"), 1);
        struct vr_buf peer;
        char t2[96];
        snprintf(t2, sizeof t2, "%s_shim", tag);
        peer_stats(t2, &peer);
        cr_assert_eq(vr_sim_calls(&peer, "cuMemImportFromShareableHandle"), 1, "%s", peer.p);
        nothing_alive(&peer, "peer");
        vr_buf_free(&peer);
    }
    nothing_alive(&p.shim.stats, "parent");
    pair_free(&p);
}

/* The four modes: only profiled backs A by VMM, the others must stay
 * the driver's own IPC. */
Test(ipc, shared_buffer_identical_in_every_mode)
{
    static const char *const modes[] = { "off", "observe", "dedup", "profiled", NULL };
    for (size_t i = 0; modes[i]; i++)
        share_in_mode(modes[i]);
}

/* A peer in mode off (a pure pass-through otherwise) still opens the
 * shim's handle: its open and close take the full path in every mode. */
Test(ipc, peer_in_mode_off_opens_the_shims_handle)
{
    static const char *const args[] = { "--case", "peeroff", NULL };
    struct pair p;
    pair_run_app(&p, "peeroff", "ipc_share", args, NULL, NULL, NULL, 0);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    has_line(&p.shim, "peer open=CUDA_SUCCESS");
    has_line(&p.shim, "parent A first=3 last=3 fnv=cc5f8ce6d14dc383");
    cr_assert_geq(vr_sim_calls(&p.shim.stats, "cuMemExportToShareableHandle"), 1);
    struct vr_buf peer;
    peer_stats("peeroff_shim", &peer);
    cr_assert_eq(vr_sim_calls(&peer, "cuMemImportFromShareableHandle"), 1, "%s", peer.p);
    nothing_alive(&peer, "peer");
    vr_buf_free(&peer);
    pair_free(&p);
}

/* A device whose driver refuses POSIX fd handles (SIMCUDA_VMM_FD=0): the
 * shim's cuMemCreate asks once with the handle type, then without, and the
 * buffers are VMM-backed all the same; their IPC export is the driver's
 * refusal for VMM memory, said once in the log (README's limits). */
Test(ipc, device_without_fd_handles_still_backs_memory)
{
    static const char *const args[] = { "--case", "share", NULL };
    static const char *const env[] = { "SIMCUDA_VMM_FD=0", NULL };
    struct pair p;
    pair_run_app(&p, "nofd", "ipc_share", args, env, NULL, NULL, 0);
    has_line(&p.plain, "parent ipc_get=CUDA_SUCCESS");
    has_line(&p.shim, "parent ipc_get=CUDA_ERROR_INVALID_VALUE");
    has_line(&p.shim, "parent B first=3 last=3 fnv=cc5f8ce6d14dc383");
    /* A and B, and the first try with the handle type */
    cr_assert_eq(vr_sim_calls(&p.shim.stats, "cuMemCreate"), 3);
    cr_assert_eq(vr_sim_calls(&p.shim.stats, "cuMemExportToShareableHandle"), 0);
    size_t len;
    const char *line = vr_log_event(&p.shim.log, "fallback", 0, &len);
    bool said = false;
    for (size_t i = 0; line; line = vr_log_event(&p.shim.log, "fallback", ++i, &len)) {
        char what[64];
        said |= vr_json_str(line, len, "what", what, sizeof what) &&
                !strcmp(what, "cuIpcGetMemHandle");
    }
    cr_assert(said, "no fallback for cuIpcGetMemHandle in:\n%s", p.shim.log.p);
    nothing_alive(&p.shim.stats, "parent");
    pair_free(&p);
}

/* The exporter freed the buffer before the peer opened its handle. */
Test(ipc, stale_handle_is_the_drivers_error)
{
    static const char *const args[] = { "--case", "stale", NULL };
    struct pair p;
    pair_run_app(&p, "stale", "ipc_share", args, NULL, NULL, NULL, 0);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    has_line(&p.shim, "peer open=CUDA_ERROR_INVALID_VALUE");
    nothing_alive(&p.shim.stats, "parent");
    pair_free(&p);
}

/* Forgeries: stdout has what any driver refuses; a forged handle of the
 * shim's (its id or its first byte changed) gets the driver's error for a
 * handle it does not know, and nothing crashes (the peer's stderr). */
Test(ipc, forged_handles_are_the_drivers_error)
{
    static const char *const args[] = { "--case", "forged", NULL };
    struct pair p;
    pair_run_app(&p, "forged", "ipc_share", args, NULL, NULL, NULL, 0);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    has_line(&p.shim, "peer open zero=CUDA_ERROR_INVALID_VALUE");
    has_line(&p.shim, "peer open random=CUDA_ERROR_INVALID_VALUE");
    has_line(&p.shim, "peer open flags0=CUDA_ERROR_INVALID_VALUE");
    has_line(&p.shim, "parent peer_exit=0");
    cr_assert(strstr(p.shim.proc.out.p, "forged_id") == NULL, "%s", p.shim.proc.out.p);
    const struct vr_run *runs[] = { &p.plain, &p.shim };
    for (size_t i = 0; i < 2; i++) {
        cr_assert(strstr(runs[i]->proc.err.p,
                         "ipc_share peer: open forged_id=CUDA_ERROR_INVALID_VALUE\n"),
                  "%s", runs[i]->proc.err.p);
        cr_assert(strstr(runs[i]->proc.err.p,
                         "ipc_share peer: open forged_magic=CUDA_ERROR_INVALID_VALUE\n"),
                  "%s", runs[i]->proc.err.p);
    }
    pair_free(&p);
}

/* The handle of an interior pointer (an H200 makes one, ipc.get_native_interior)
 * names the whole allocation: the peer's open maps it from its first byte,
 * natively and under the shim (the shim's own handle of VMM-backed memory). */
Test(ipc, interior_pointer_handle_opens_the_allocation)
{
    static const char *const args[] = { "--case", "interior", NULL };
    struct pair p;
    pair_run_app(&p, "interior", "ipc_share", args, NULL, NULL, NULL, 0);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    has_line(&p.shim, "parent ipc_get_interior=CUDA_SUCCESS");
    has_line(&p.shim, "peer open=CUDA_SUCCESS");
    has_line(&p.shim, "peer range=CUDA_SUCCESS base_ok=1 size=2097152");
    has_line(&p.shim, "peer A first=1.5 last=1.5 fnv=b841b9935391a383");
    has_line(&p.shim, "peer reopen=CUDA_SUCCESS same=1");
    has_line(&p.shim, "parent A first=3 last=3 fnv=cc5f8ce6d14dc383");
    cr_assert_geq(vr_sim_calls(&p.shim.stats, "cuMemExportToShareableHandle"), 1);
    nothing_alive(&p.shim.stats, "parent");
    pair_free(&p);
}

/* The exporter frees the buffer while the peer has it open: undefined
 * (cuda.h), but neither run crashes and the peer reads the same bytes
 * (the memory lives while mapped: simcuda's memfd, the driver's handle). */
Test(ipc, exporter_frees_while_the_peer_has_it_open)
{
    static const char *const args[] = { "--case", "freed", NULL };
    struct pair p;
    pair_run_app(&p, "freed", "ipc_share", args, NULL, NULL, NULL, 0);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    has_line(&p.shim, "parent free_while_open=CUDA_SUCCESS");
    has_line(&p.shim, "peer A after the exporter's free first=1.5 last=1.5 fnv=b841b9935391a383");
    has_line(&p.shim, "peer close2=CUDA_SUCCESS");
    nothing_alive(&p.shim.stats, "parent");
    struct vr_buf peer;
    peer_stats("freed_shim", &peer);
    nothing_alive(&peer, "peer");
    vr_buf_free(&peer);
    pair_free(&p);
}

/* The peer without the shim cannot know the shim's handle: it gets the
 * driver's error for an unknown handle, and the exporter's buffer is as it
 * was (docs/design.md, README's limits). Natively the peer opens it. */
Test(ipc, peer_without_the_shim_gets_the_drivers_error)
{
    static const char *const args[] = { "--case", "bare", NULL };
    struct pair p;
    pair_run_app(&p, "bare", "ipc_share", args, NULL, NULL, NULL, 0);
    has_line(&p.plain, "peer open=CUDA_SUCCESS");
    has_line(&p.plain, "parent A first=3 last=3 fnv=cc5f8ce6d14dc383");
    has_line(&p.shim, "parent ipc_get=CUDA_SUCCESS");
    has_line(&p.shim, "peer open=CUDA_ERROR_INVALID_VALUE");
    has_line(&p.shim, "parent peer_exit=0");
    has_line(&p.shim, "parent A first=1.5 last=1.5 fnv=b841b9935391a383");
    has_line(&p.shim, "parent B first=3 last=3 fnv=cc5f8ce6d14dc383");
    nothing_alive(&p.shim.stats, "parent");
    pair_free(&p);
}
