/* report: what a decision log says, for a person or a machine.
 *
 *   report_table  per process, per exec: state, buffers selected/rejected
 *                 with reasons, updates absorbed, rebinds, fallbacks, then
 *                 the process's counters (`varemap report`)
 *   report_json   the same as one JSON document (`varemap report --json`)
 *   report_brief  a few lines per process, each prefixed "varemap: ", for
 *                 the command's summary at exit
 *   report_bad    one line per malformed line: FILE:LINE: reason; skipped
 */
#ifndef VR_TOOL_REPORT_H
#define VR_TOOL_REPORT_H

#include <stdio.h>

#include "dlog.h"

void report_table(FILE *f, const struct dl_model *m);
void report_json(FILE *f, const struct dl_model *m);
/* `hint` (may be NULL) is added after the exec lines that were cut. */
void report_brief(FILE *f, const struct dl_model *m, const char *hint);
void report_bad(FILE *f, const struct dl_model *m, const char *who);

/* `varemap report [--json] LOG...`: argv after "report". Returns the exit
 * status: 0, 1 when no line could be read, 2 on a usage error. */
int report_main(int argc, char **argv);

#endif
