/* What a signal that ends the process undoes, and says (signals.c): the temporary files
 * this process is writing are removed (issue 43, item 2: SIGINT or SIGTERM during a save
 * left `OUT.tmp.*` behind, up to 128 MiB each), and a SIGBUS in a mapping of a file the
 * process reads but does not own (the model, its external data: another process cut it
 * short) ends it as an input error instead of a crash (item 3). The registry is a table
 * the handlers read without locks or allocation; amp_sig_install, called by the program
 * (tools/ampc.c), installs them: a library does not take a process's signals. */
#ifndef AMP_SIGNALS_H
#define AMP_SIGNALS_H

#include <signal.h>
#include <stddef.h>

typedef struct AmpSigEntry AmpSigEntry;

/* What ampc says of a file cut short while read, after its name ("<name>: ..."): by the
 * SIGBUS handler, and by a save whose write from the lost pages failed (EFAULT). */
#define AMP_SIG_CUT_SHORT \
    "the file was cut short while ampc read it (another process truncated it); no output was replaced"

/* A temporary file this process made and will rename or remove (ir/output.c's
 * AmpTempFile): removed by a fatal signal until then. `path` stays valid until
 * amp_sig_forget. NULL when out of memory (the file is then not removed). */
AmpSigEntry *amp_sig_temp(const char *path);
/* A read-only mapping [data, data + len) of a file this process reads: a SIGBUS inside it
 * means the file was cut short under the process. `name`, what the message calls the file,
 * stays valid until amp_sig_forget. NULL when out of memory. */
AmpSigEntry *amp_sig_mapping(const void *data, size_t len, const char *name);
/* Takes the entry out of the table (NULL: nothing), before what it names is freed. */
void amp_sig_forget(AmpSigEntry *e);

/* Blocks the signals whose handlers remove temporary files in this thread (*old: the mask
 * before), so that creating a file and registering it happen with no such signal between;
 * amp_sig_release restores *old. */
void amp_sig_hold(sigset_t *old);
void amp_sig_release(const sigset_t *old);

/* The handlers, installed once by the program, `prog` naming it in messages:
 * SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGPIPE remove the registered temporary files, then
 * end the process by the same signal (its default action, as without the handler); a
 * SIGBUS at an address inside a registered mapping removes them, prints
 * "<prog>: <name>: ..." (the file was cut short while read) and exits with
 * AMP_ERR_INPUT; any other SIGBUS removes them and takes its default action. A signal
 * ignored when this is called stays ignored. */
void amp_sig_install(const char *prog);

#endif
