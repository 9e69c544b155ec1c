#include "report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Reasons in words, for the verdicts this version knows; any other verdict
 * is printed as it stands. */
static const char *verdict_words(const char *v)
{
    static const struct { const char *v, *words; } known[] = {
        { "selected", "selected: remapped into a slice" },
        { "not_vmm_backed", "not VMM-backed (native cuMemAlloc, too small, or over the padding limit)" },
        { "freed", "freed before the decision" },
        { "too_large", "too large: the VA reservation failed" },
        { "map_failed", "mapping into the slice failed" },
        { "not_worth_it", "not worth it: the slice would cost more than the updates it saves" },
        { "still", "still: never moved while profiled, compared as dedup does (no slice)" },
        { "unanchored_word", "unanchored word: a pointer into it (or at its end) moved, so its words could not be translated together" },
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(known[i].v, v) == 0)
            return known[i].words;
    return v;
}

static const char *exec_state(const struct dl_proc *p, const struct dl_exec *e, char *buf,
                              size_t cap)
{
    if (e->state) {
        snprintf(buf, cap, "%s%s", e->observe ? "observe:" : "", e->state);
        return buf;
    }
    if (p->mode && strcmp(p->mode, "dedup") == 0)
        return "dedup";
    if (p->mode && strcmp(p->mode, "off") == 0)
        return "off";
    return "profiling";
}

static void fmt_u64(char *buf, size_t cap, bool known, uint64_t v)
{
    if (known)
        snprintf(buf, cap, "%" PRIu64, v);
    else
        snprintf(buf, cap, "-");
}

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* The summary keys printed in words; any other field goes to "other". */
static const char *const summary_known[] = {
    "ts", "pid", "event", "setparams_seen", "setparams_skipped", "setparams_forwarded",
    "transition_updates", "launches", "execs_active", "execs_disabled", "slices_bound",
    "rebinds", "rebind_waits", "vmm_bytes", "padding_bytes", "vmm_fallbacks", "unrouted_procs",
    "log_lines_dropped", "updates_seen", "updates_absorbed",
};

static bool is_known_summary_key(const char *k)
{
    for (size_t i = 0; i < sizeof summary_known / sizeof summary_known[0]; i++)
        if (strcmp(summary_known[i], k) == 0)
            return true;
    return false;
}

static void print_scalar(FILE *f, const struct vj *v)
{
    if (v->type == VJ_STR)
        fputs(v->str, f);
    else
        vj_write(f, v);
}

/* " key=value" for every member of obj not in skip[]. */
static void print_extra_fields(FILE *f, const struct vj *obj, const char *const *skip, size_t nskip)
{
    if (obj->type != VJ_OBJ)
        return;
    for (size_t i = 0; i < obj->n; i++) {
        bool skipped = false;
        for (size_t k = 0; k < nskip && !skipped; k++)
            skipped = strcmp(skip[k], obj->keys[i]) == 0;
        if (skipped)
            continue;
        fprintf(f, " %s=", obj->keys[i]);
        print_scalar(f, &obj->items[i]);
    }
}

static void print_counts(FILE *f, const struct dl_counts *c)
{
    for (size_t i = 0; i < c->n; i++)
        fprintf(f, "%s%s %" PRIu64, i ? ", " : "", c->v[i].name, c->v[i].n);
}

/* ---- the table --------------------------------------------------------- */

static void table_process(FILE *f, const struct dl_proc *p)
{
    fprintf(f, "== pid %" PRIu64 " (%s)\n", p->pid, p->log);
    if (p->started)
        fprintf(f, "   mode %s, profile window %" PRIu64 " launches, driver %" PRId64
                   ", VMM %s\n",
                p->mode ? p->mode : "?", p->profile_launches, p->driver_version,
                p->vmm_supported ? "yes" : "no");
    else
        fprintf(f, "   (no start line)\n");

    if (p->nexecs == 0) {
        fprintf(f, "   no graph exec was instantiated\n");
    } else {
        fprintf(f, "   %-18s %6s %-16s %8s %8s %9s %9s %9s %7s\n", "exec", "nodes", "state",
                "selected", "rejected", "updates", "absorbed", "forwarded", "rebinds");
        for (size_t i = 0; i < p->nexecs; i++) {
            const struct dl_exec *e = &p->execs[i];
            char st[48], nodes[24], sel[24], rej[24], seen[24], skip[24], fwd[24], reb[24];
            bool decided = e->decisions > 0;
            fmt_u64(nodes, sizeof nodes, e->instantiated, e->kernel_nodes);
            fmt_u64(sel, sizeof sel, decided, e->selected);
            fmt_u64(rej, sizeof rej, decided, e->rejected);
            fmt_u64(seen, sizeof seen, e->counted, e->c.seen);
            fmt_u64(skip, sizeof skip, e->counted, e->c.skipped);
            fmt_u64(fwd, sizeof fwd, e->counted, e->c.forwarded);
            fmt_u64(reb, sizeof reb, true, e->counted ? e->c.rebinds : e->rebind_events);
            fprintf(f, "   %-18s %6s %-16s %8s %8s %9s %9s %9s %7s\n", e->handle, nodes,
                    exec_state(p, e, st, sizeof st), sel, rej, seen, skip, fwd, reb);
        }
        for (size_t i = 0; i < p->nexecs; i++) {
            const struct dl_exec *e = &p->execs[i];
            bool any = e->decisions || e->forward_reasons.n || e->opaque_nodes || e->resets ||
                       e->rebinds_waited;
            if (!any)
                continue;
            fprintf(f, "   exec %s:\n", e->handle);
            if (e->decisions)
                fprintf(f, "     decided after %" PRIu64 " launches: %s, %" PRIu64
                           " bytes reserved\n",
                        e->profiled_launches, e->state ? e->state : "?", e->reserved_bytes);
            if (e->opaque_nodes)
                fprintf(f, "     %" PRIu64 " opaque nodes (always passed through)\n",
                        e->opaque_nodes);
            if (e->candidates.type == VJ_ARR) {
                static const char *const skip[] = { "ptr", "size", "anchors", "verdict" };
                for (size_t k = 0; k < e->candidates.n; k++) {
                    const struct vj *c = &e->candidates.items[k];
                    const char *ptr = "?", *verdict = "unknown";
                    uint64_t size = 0, anchors = 0;
                    vj_get_str(c, "ptr", &ptr);
                    vj_get_str(c, "verdict", &verdict);
                    vj_get_u64(c, "size", &size);
                    vj_get_u64(c, "anchors", &anchors);
                    fprintf(f, "     buffer %-16s %12" PRIu64 " B %5" PRIu64 " anchors  %s", ptr,
                            size, anchors, verdict_words(verdict));
                    print_extra_fields(f, c, skip, 4);
                    fputc('\n', f);
                }
                if (e->candidates.n == 0)
                    fprintf(f, "     no stable pointer argument\n");
            }
            if (e->unstable.type == VJ_ARR && e->unstable.n) {
                fprintf(f, "     moved between profiled launches (not candidates):");
                for (size_t k = 0; k < e->unstable.n; k++) {
                    fputc(' ', f);
                    print_scalar(f, &e->unstable.items[k]);
                }
                fputc('\n', f);
            }
            if (e->costs.type == VJ_OBJ) {
                fprintf(f, "     costs (ns):");
                print_extra_fields(f, &e->costs, NULL, 0);
                fputc('\n', f);
            }
            if (e->resets)
                fprintf(f, "     reset %" PRIu64 " times by cuGraphExecUpdate (profiled again)\n",
                        e->resets);
            if (e->rebinds_waited)
                fprintf(f, "     %" PRIu64 " rebinds waited for a launch\n", e->rebinds_waited);
            if (e->forward_reasons.n) {
                fprintf(f, "     forwarded because: ");
                print_counts(f, &e->forward_reasons);
                fputc('\n', f);
            }
        }
    }
    for (size_t i = 0; i < p->fallbacks.n; i++)
        fprintf(f, "   fallback %s (%" PRIu64 " %s)\n", p->fallbacks.v[i].name,
                p->fallbacks.v[i].n, p->fallbacks.v[i].n == 1 ? "line" : "lines");
    if (!p->has_summary) {
        fprintf(f, "   no summary line: the process did not exit normally, or is still running\n");
        return;
    }
    uint64_t seen = dl_summary_u64(p, "setparams_seen");
    uint64_t skipped = dl_summary_u64(p, "setparams_skipped");
    fprintf(f, "   SetParams %" PRIu64 " seen, %" PRIu64 " absorbed (%.1f%%), %" PRIu64
               " forwarded, %" PRIu64 " transition updates\n",
            seen, skipped, pct(skipped, seen), dl_summary_u64(p, "setparams_forwarded"),
            dl_summary_u64(p, "transition_updates"));
    /* Logs of shims before version 5 have no update counters: 0 and 0. */
    uint64_t useen = dl_summary_u64(p, "updates_seen");
    uint64_t uabs = dl_summary_u64(p, "updates_absorbed");
    fprintf(f, "   graph updates %" PRIu64 " seen, %" PRIu64 " absorbed (%.1f%%), %" PRIu64
               " sent to the driver\n",
            useen, uabs, pct(uabs, useen), useen >= uabs ? useen - uabs : 0);
    fprintf(f, "   launches %" PRIu64 ", execs active %" PRIu64 ", disabled %" PRIu64
               ", rebinds %" PRIu64 " (waited %" PRIu64 "), VMM fallbacks %" PRIu64
               ", unrouted procs %" PRIu64 "\n",
            dl_summary_u64(p, "launches"), dl_summary_u64(p, "execs_active"),
            dl_summary_u64(p, "execs_disabled"), dl_summary_u64(p, "rebinds"),
            dl_summary_u64(p, "rebind_waits"), dl_summary_u64(p, "vmm_fallbacks"),
            dl_summary_u64(p, "unrouted_procs"));
    fprintf(f, "   at exit: %" PRIu64 " slices bound, %" PRIu64 " bytes VMM-backed (%" PRIu64
               " padding)\n",
            dl_summary_u64(p, "slices_bound"), dl_summary_u64(p, "vmm_bytes"),
            dl_summary_u64(p, "padding_bytes"));
    uint64_t dropped = dl_summary_u64(p, "log_lines_dropped");
    if (dropped)
        fprintf(f, "   %" PRIu64 " log lines were dropped (too long, or the write failed)\n",
                dropped);
    bool other = false;
    for (size_t i = 0; i < p->summary.n; i++) {
        if (is_known_summary_key(p->summary.keys[i]))
            continue;
        fprintf(f, "%s %s=", other ? "" : "   other:", p->summary.keys[i]);
        print_scalar(f, &p->summary.items[i]);
        other = true;
    }
    if (other)
        fputc('\n', f);
}

/* The whole job: every process's summary counters added up, so a job of
 * several processes (the %p logs of an MPI run) reads as one. */
static const char *const job_keys[] = {
    "setparams_seen", "setparams_skipped", "setparams_forwarded", "transition_updates",
    "launches", "rebinds", "vmm_fallbacks", "unrouted_procs", "updates_seen", "updates_absorbed",
};
#define NJOB (sizeof job_keys / sizeof job_keys[0])

struct job {
    size_t summaries, execs;
    uint64_t sum[NJOB];
};

static struct job job_of(const struct dl_model *m)
{
    struct job j = {0};
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct dl_proc *p = &m->procs[i];
        j.execs += p->nexecs;
        if (!p->has_summary)
            continue;
        j.summaries++;
        for (size_t k = 0; k < NJOB; k++)
            j.sum[k] += dl_summary_u64(p, job_keys[k]);
    }
    return j;
}

static void table_job(FILE *f, const struct dl_model *m)
{
    struct job j = job_of(m);
    fprintf(f, "== job: %zu processes (%zu exited with a summary), %zu execs\n", m->nprocs,
            j.summaries, j.execs);
    fprintf(f, "   SetParams %" PRIu64 " seen, %" PRIu64 " absorbed (%.1f%%), %" PRIu64
               " forwarded, %" PRIu64 " transition updates\n",
            j.sum[0], j.sum[1], pct(j.sum[1], j.sum[0]), j.sum[2], j.sum[3]);
    fprintf(f, "   launches %" PRIu64 ", rebinds %" PRIu64 ", VMM fallbacks %" PRIu64
               ", unrouted procs %" PRIu64 "\n",
            j.sum[4], j.sum[5], j.sum[6], j.sum[7]);
    fprintf(f, "   graph updates %" PRIu64 " seen, %" PRIu64 " absorbed (%.1f%%)\n", j.sum[8],
            j.sum[9], pct(j.sum[9], j.sum[8]));
}

void report_table(FILE *f, const struct dl_model *m)
{
    size_t readable = 0;
    for (size_t i = 0; i < m->nfiles; i++)
        readable += m->files[i].err == 0;
    fprintf(f, "varemap report: %zu %s, %zu %s, %zu lines", readable,
            readable == 1 ? "log" : "logs", m->nprocs, m->nprocs == 1 ? "process" : "processes",
            m->events);
    if (m->nbads)
        fprintf(f, " (%zu bad lines skipped)", m->nbads);
    fputc('\n', f);
    if (m->nprocs > 1)
        table_job(f, m);
    for (size_t i = 0; i < m->nprocs; i++)
        table_process(f, &m->procs[i]);
}

/* ---- JSON -------------------------------------------------------------- */

static void json_counts(FILE *f, const struct dl_counts *c)
{
    fputc('{', f);
    for (size_t i = 0; i < c->n; i++) {
        if (i)
            fputc(',', f);
        vj_write_str(f, c->v[i].name);
        fprintf(f, ":%" PRIu64, c->v[i].n);
    }
    fputc('}', f);
}

static void json_exec(FILE *f, const struct dl_proc *p, const struct dl_exec *e)
{
    char st[48];
    fputs("{\"exec\":", f);
    vj_write_str(f, e->handle);
    fprintf(f, ",\"state\":");
    vj_write_str(f, exec_state(p, e, st, sizeof st));
    fprintf(f, ",\"decided\":%s,\"observe\":%s", e->decisions ? "true" : "false",
            e->observe ? "true" : "false");
    if (e->instantiated)
        fprintf(f, ",\"kernel_nodes\":%" PRIu64 ",\"opaque_nodes\":%" PRIu64, e->kernel_nodes,
                e->opaque_nodes);
    else
        fputs(",\"kernel_nodes\":null,\"opaque_nodes\":null", f);
    fprintf(f, ",\"profiled_launches\":%" PRIu64 ",\"reserved_bytes\":%" PRIu64
               ",\"selected\":%" PRIu64 ",\"rejected\":%" PRIu64,
            e->profiled_launches, e->reserved_bytes, e->selected, e->rejected);
    fputs(",\"verdicts\":", f);
    json_counts(f, &e->verdicts);
    fputs(",\"candidates\":", f);
    if (e->candidates.type == VJ_ARR)
        vj_write(f, &e->candidates);
    else
        fputs("[]", f);
    fputs(",\"unstable\":", f);
    if (e->unstable.type == VJ_ARR)
        vj_write(f, &e->unstable);
    else
        fputs("[]", f);
    if (e->costs.type != VJ_NULL) {
        fputs(",\"costs_ns\":", f);
        vj_write(f, &e->costs);
    }
    fputs(",\"counters\":", f);
    if (e->counted)
        fprintf(f, "{\"setparams_seen\":%" PRIu64 ",\"setparams_skipped\":%" PRIu64
                   ",\"setparams_forwarded\":%" PRIu64 ",\"transition_updates\":%" PRIu64
                   ",\"launches\":%" PRIu64 ",\"rebinds\":%" PRIu64 ",\"rebind_waits\":%" PRIu64
                   "}",
                e->c.seen, e->c.skipped, e->c.forwarded, e->c.transition, e->c.launches,
                e->c.rebinds, e->c.rebind_waits);
    else
        fputs("null", f);
    fprintf(f, ",\"slice_rebinds\":%" PRIu64 ",\"rebinds_waited\":%" PRIu64 ",\"resets\":%" PRIu64
               ",\"destroyed\":%s,\"forward_reasons\":",
            e->rebind_events, e->rebinds_waited, e->resets, e->destroyed ? "true" : "false");
    json_counts(f, &e->forward_reasons);
    fputc('}', f);
}

void report_json(FILE *f, const struct dl_model *m)
{
    fputs("{\"logs\":[", f);
    for (size_t i = 0; i < m->nfiles; i++) {
        const struct dl_file *lf = &m->files[i];
        fputs(i ? ",\n  {\"path\":" : "\n  {\"path\":", f);
        vj_write_str(f, lf->path);
        fprintf(f, ",\"lines\":%zu,\"bad_lines\":%zu,\"error\":", lf->lines, lf->bad);
        if (lf->err)
            vj_write_str(f, strerror(lf->err));
        else
            fputs("null", f);
        fputc('}', f);
    }
    fputs("],\n\"bad_lines\":[", f);
    for (size_t i = 0; i < m->nbads; i++) {
        fputs(i ? ",\n  {\"file\":" : "\n  {\"file\":", f);
        vj_write_str(f, m->bads[i].file);
        fprintf(f, ",\"line\":%zu,\"error\":", m->bads[i].line);
        vj_write_str(f, m->bads[i].why);
        fputc('}', f);
    }
    fputs("],\n\"processes\":[", f);
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct dl_proc *p = &m->procs[i];
        fprintf(f, "%s{\"pid\":%" PRIu64 ",\"log\":", i ? ",\n  " : "\n  ", p->pid);
        vj_write_str(f, p->log);
        fputs(",\"mode\":", f);
        if (p->mode)
            vj_write_str(f, p->mode);
        else
            fputs("null", f);
        if (p->started)
            fprintf(f, ",\"profile_launches\":%" PRIu64 ",\"driver_version\":%" PRId64
                       ",\"vmm_supported\":%s",
                    p->profile_launches, p->driver_version, p->vmm_supported ? "true" : "false");
        fputs(",\"execs\":[", f);
        for (size_t j = 0; j < p->nexecs; j++) {
            fputs(j ? ",\n    " : "\n    ", f);
            json_exec(f, p, &p->execs[j]);
        }
        fputs("],\"fallbacks\":", f);
        json_counts(f, &p->fallbacks);
        fputs(",\"summary\":", f);
        if (p->has_summary) {
            /* The counters as the shim wrote them, unknown ones included. */
            fputc('{', f);
            bool first = true;
            for (size_t k = 0; k < p->summary.n; k++) {
                const char *key = p->summary.keys[k];
                if (!strcmp(key, "ts") || !strcmp(key, "pid") || !strcmp(key, "event"))
                    continue;
                if (!first)
                    fputc(',', f);
                first = false;
                vj_write_str(f, key);
                fputc(':', f);
                vj_write(f, &p->summary.items[k]);
            }
            fputc('}', f);
        } else {
            fputs("null", f);
        }
        fputc('}', f);
    }
    struct job j = job_of(m);
    fprintf(f, "],\n\"job\":{\"processes\":%zu,\"summaries\":%zu,\"execs\":%zu", m->nprocs,
            j.summaries, j.execs);
    for (size_t k = 0; k < NJOB; k++)
        fprintf(f, ",\"%s\":%" PRIu64, job_keys[k], j.sum[k]);
    fputs("}}\n", f);
}

/* ---- the command's summary --------------------------------------------- */

#define BRIEF_EXECS 8

static void brief_exec(FILE *f, const struct dl_proc *p, const struct dl_exec *e)
{
    char st[48];
    fprintf(f, "varemap:   exec %s: %s", e->handle, exec_state(p, e, st, sizeof st));
    if (e->decisions) {
        fprintf(f, "; buffers %" PRIu64 " selected, %" PRIu64 " rejected", e->selected,
                e->rejected);
        bool first = true;
        for (size_t i = 0; i < e->verdicts.n; i++) {
            if (dl_verdict_selected(e->verdicts.v[i].name))
                continue;
            fprintf(f, "%s%s %" PRIu64, first ? " (" : ", ", e->verdicts.v[i].name,
                    e->verdicts.v[i].n);
            first = false;
        }
        if (!first)
            fputc(')', f);
    }
    if (e->counted)
        fprintf(f, "; updates %" PRIu64 " of %" PRIu64 " absorbed", e->c.skipped, e->c.seen);
    uint64_t rebinds = e->counted ? e->c.rebinds : e->rebind_events;
    if (rebinds)
        fprintf(f, "; rebinds %" PRIu64, rebinds);
    fputc('\n', f);
}

void report_brief(FILE *f, const struct dl_model *m, const char *hint)
{
    for (size_t i = 0; i < m->nprocs; i++) {
        const struct dl_proc *p = &m->procs[i];
        fprintf(f, "varemap: pid %" PRIu64 ", mode %s: ", p->pid, p->mode ? p->mode : "?");
        if (p->has_summary) {
            uint64_t seen = dl_summary_u64(p, "setparams_seen");
            uint64_t skipped = dl_summary_u64(p, "setparams_skipped");
            uint64_t fallbacks = dl_summary_u64(p, "vmm_fallbacks");
            fprintf(f, "%" PRIu64 " of %" PRIu64 " node updates absorbed (%.1f%%), %" PRIu64
                       " forwarded, %" PRIu64 " rebinds, %" PRIu64 " VMM %s\n",
                    skipped, seen, pct(skipped, seen), dl_summary_u64(p, "setparams_forwarded"),
                    dl_summary_u64(p, "rebinds"), fallbacks,
                    fallbacks == 1 ? "fallback" : "fallbacks");
        } else {
            fprintf(f, "no summary (the process did not exit normally)\n");
        }
        for (size_t j = 0; j < p->nexecs && j < BRIEF_EXECS; j++)
            brief_exec(f, p, &p->execs[j]);
        if (p->nexecs > BRIEF_EXECS)
            fprintf(f, "varemap:   ... %zu more execs%s%s\n", p->nexecs - BRIEF_EXECS,
                    hint ? ": " : "", hint ? hint : "");
        for (size_t j = 0; j < p->fallbacks.n; j++)
            fprintf(f, "varemap:   fallback %s\n", p->fallbacks.v[j].name);
    }
}

void report_bad(FILE *f, const struct dl_model *m, const char *who)
{
    for (size_t i = 0; i < m->nbads; i++)
        fprintf(f, "%s: %s:%zu: %s; skipped\n", who, m->bads[i].file, m->bads[i].line,
                m->bads[i].why);
}

/* ---- varemap report ---------------------------------------------------- */

static void report_usage(FILE *f)
{
    fputs("usage: varemap report [--json] LOG...\n"
          "  Reads decision logs (VAREMAP_LOG files; several at once, such as the %p\n"
          "  files of a multi-process job) and prints, per process and per exec, what\n"
          "  the shim decided. --json prints the same as one JSON document.\n",
          f);
}

int report_main(int argc, char **argv)
{
    bool json = false, dashdash = false;
    struct dl_model m = { 0 };
    int nlogs = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!dashdash && a[0] == '-' && a[1] != '\0') {
            if (!strcmp(a, "--json")) {
                json = true;
            } else if (!strcmp(a, "--")) {
                dashdash = true;
            } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
                report_usage(stdout);
                dl_free(&m);
                return 0;
            } else {
                fprintf(stderr, "varemap report: unknown option %s\n", a);
                report_usage(stderr);
                dl_free(&m);
                return 2;
            }
            continue;
        }
        nlogs++;
    }
    if (nlogs == 0) {
        fputs("varemap report: no log given\n", stderr);
        report_usage(stderr);
        return 2;
    }
    dashdash = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!dashdash && a[0] == '-' && a[1] != '\0') {
            dashdash = dashdash || !strcmp(a, "--");
            continue;
        }
        int rc = dl_read(&m, a, 0);
        if (rc != 0)
            fprintf(stderr, "varemap report: cannot read %s: %s\n", a, strerror(-rc));
    }
    dl_finish(&m);
    report_bad(stderr, &m, "varemap report");
    int status = 0;
    if (m.events == 0) {
        fputs("varemap report: no decision-log line could be read\n", stderr);
        status = 1;
    }
    /* A machine gets its document (with the bad lines) even then. */
    if (json)
        report_json(stdout, &m);
    else if (status == 0)
        report_table(stdout, &m);
    dl_free(&m);
    if (fflush(stdout) != 0 && status == 0) {
        fprintf(stderr, "varemap report: cannot write the report: %s\n", strerror(errno));
        status = 1;
    }
    return status;
}
