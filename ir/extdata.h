/* External tensor data: files beside the model, mapped read-only, with every path
 * confined to the model's folder and every offset/length checked against the file. */
#ifndef AMP_EXTDATA_H
#define AMP_EXTDATA_H

#include <sys/stat.h>

#include "ir/ir.h"

/* Maps (once per file per model) `location` relative to m->dir and returns the
 * `length` bytes at `offset`. length < 0 means "to the end of the file". */
AmpCode amp_extdata_map(AmpModel *m, const char *location, int64_t offset, int64_t length,
                        AmpBytes *out, AmpStatus *st);

/* Checks that `location` is a plain relative path: not empty, not absolute, no ".."
 * component, no backslash or NUL tricks. The symlink check happens at map time. */
AmpCode amp_extdata_check_location(const char *location, AmpStatus *st);
/* The location (as the model writes it) of the external data file of m that `path` names,
 * under this name or another (same device and inode), or NULL: a file m reads. */
const char *amp_extdata_reads(const AmpModel *m, const char *path);

/* Hands m the mapping [data, data + len) of the model file itself (`path`, its identity
 * *sb), unmapped with the external data files; false when out of memory (the caller
 * still owns it). */
bool amp_extdata_keep(AmpModel *m, void *data, size_t len, const char *path, const struct stat *sb);
/* The path of a file m maps (the model, its external data) that is now shorter than its
 * mapping, or NULL: another process cut it short while m read it (a write from the lost
 * pages fails with EFAULT, a read of them raises SIGBUS: ir/signals.h). */
const char *amp_extdata_shrunk(const AmpModel *m);
void amp_extdata_unmap_all(AmpModel *m);

#endif
