/* Reading every value a session computes (private to the runtime and the tools): a hook
 * called after each node of the main graph runs, the values it sees copied out as
 * float32, and one node run alone on the CPU on inputs the caller gives. `ampc calibrate`
 * records value ranges this way, `ampc compare` a node's local error. */
#ifndef AMP_OBSERVE_H
#define AMP_OBSERVE_H

#include <stddef.h>

#include "ampc/ampc.h"
#include "runtime/exec.h"

/* Calls fn after each node of s's main graph in every later run and training step (NULL:
 * no more calls). Nodes as the session's plan has them: on a backend that fuses (CUDA,
 * sim), a fused node stands for several of the model's and the values inside it are never
 * made; open the session with no_fuse to see every node and value. */
void amp_session_set_hook(AmpSession *s, AmpExecHook fn, void *ctx);

/* The model as s runs it (after AMP_AUTO's rewrite): the graph the hook's nodes belong to.
 * Owned by the session; the tools read it and run nodes of it (amp_run_node_alone). */
AmpModel *amp_session_model(AmpSession *s);

/* The communicator of a data-parallel session (backend/comm.h; docs/parallel.md), NULL for
 * a session of one rank: `ampc run` averages the ranks' losses through it, prints what the
 * gradients' all-reduce moved, and ends the job through it on an error. */
struct AmpComm *amp_session_comm(AmpSession *s);

/* Value v as e holds it (after its producer ran, inside a hook) copied out into *out as
 * float32 (malloc'd data: free with amp_buf_free), converting float16 and bfloat16 (and
 * double). AMP_ERR_UNSUPPORTED when it is no float value or e holds nothing for it. */
AmpCode amp_exec_value_f32(AmpExec *e, const AmpValue *v, AmpBuf *out, AmpStatus *st);

/* Runs node n of m alone on the CPU backend: in[i] are host buffers (NULL: input left
 * out), out[i] host buffers the caller placed with the dtype and shape the node makes
 * (data NULL: an output not wanted is not written). */
AmpCode amp_run_node_alone(const AmpModel *m, const AmpNode *n, const AmpBuf *const *in, AmpBuf *out,
                           AmpStatus *st);

/* The training steps' loss among the TRAIN outputs: the one named `name` (NULL: the one
 * scalar float output whose name holds "loss", not one of the loss-scaling pass's): its
 * index, -1 when there is none, -2 (with st set) when `name` names no output or several
 * could be it. `ampc run` prints it; the session reports it (AmpSessionStats.loss). */
int amp_session_find_loss(const AmpSession *s, const char *name, AmpStatus *st);

/* Element i of a view as a double (float16 and bfloat16 widened; 0 for a type without one). */
double amp_view_value(const AmpTensorView *t, size_t i);

#endif
