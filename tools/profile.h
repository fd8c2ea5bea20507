/* `ampc bench --profile`: where a run's time goes, by op type and by node, measured on
 * the host between the executor's calls of the node hook (runtime/observe.h) over the
 * timed runs. Right for the CPU backend, whose kernels finish before they return; on a
 * device that queues kernels it measures the launches (the summary says so). */
#ifndef AMPC_PROFILE_H
#define AMPC_PROFILE_H

#include <stdio.h>

#include "ampc/ampc.h"

typedef struct AmpcProfile AmpcProfile;

/* A profile of s's main-graph nodes; NULL when out of memory. */
AmpcProfile *ampc_profile_new(AmpSession *s);
/* Marks the start of a timed run (what comes before its first node, inputs in, is
 * counted as outside the nodes); ampc_profile_end_run after it, with its time. */
void ampc_profile_begin_run(AmpcProfile *p);
void ampc_profile_end_run(AmpcProfile *p, double run_ms);
/* Prints the table per op type (time per run, share, nodes) and the `top` slowest nodes. */
void ampc_profile_print(FILE *f, const AmpcProfile *p, const char *backend, int top);
/* Removes the hook and frees p. */
void ampc_profile_free(AmpcProfile *p);

#endif
