/* External data files are memory-mapped, not copied (issue 26, point 10): a data file cut
 * short while a model that maps it is converted makes the pages past its new end unreadable.
 * What ampc does (issue 43, item 3; docs/cli.md, "What a conversion does"): an input error
 * naming the file, with nothing left behind. A page read by a pass raises SIGBUS, which
 * the handler ampc installs (ir/signals.h) turns into exit 1 and the message, after
 * removing the temporary files; a big tensor written from the mapping fails the save
 * (write(2) reports EFAULT), which the saver reports as the same input error. Either way
 * OUT keeps its old contents and no temporary file is left. (Before, the process died of
 * SIGBUS, leaving `OUT.tmp.*`, or the save failed as an internal error, "Bad address".)
 * These tests cut the file in a child process that installs the handlers as ampc does,
 * and check that outcome, OUT and the folder from the parent. */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ir/ir.h"
#include "ir/signals.h"
#include "tests/ir/irtest_util.h"

enum { N = 1 << 16 }; /* floats: 256 KiB, written from where it lies */

static const char old_out[] = "the previous OUT\n";

/* Y = Add(A, B): A is N floats, all of w.bin; B inline. */
static void write_model(const char *dir) {
    const int64_t d[1] = {N};
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    cr_assert(a && b);
    for (size_t i = 0; i < N; i++) a[i] = (float)i, b[i] = 1.0f;
    char *wp = tu_path(dir, "w.bin");
    cr_assert(tu_write(wp, a, N * sizeof *a));
    PbBuf ta = {0}, tb = {0}, g = {0}, model = {0};
    onnx_tensor_head(&ta, "A", 1, 1, d);
    onnx_tensor_external(&ta, "w.bin", 0, -1);
    onnx_tensor_head(&tb, "B", 1, 1, d);
    pb_bytes(&tb, T_RAW, b, N * sizeof *b);
    const char *in[2] = {"A", "B"}, *o[1] = {"Y"};
    onnx_node(&g, "Add", "add", 2, in, 1, o, NULL);
    pb_str(&g, G_NAME, "g");
    pb_msg(&g, G_INIT, &ta);
    pb_msg(&g, G_INIT, &tb);
    onnx_vi(&g, G_OUTPUT, "Y", 1, 1, d);
    onnx_model(&model, &g, 13);
    char *mp = tu_path(dir, "model.onnx");
    cr_assert(tu_write(mp, model.data, model.len));
    free(a), free(b), free(wp), free(mp);
    pb_free(&model);
}

/* In a child, as ampc: the signal handlers; load, cut w.bin to `cut` bytes, touch A when
 * `read_it` (as a pass would), save to out.onnx inline (external: with a data file).
 * Exits with the save's code; the handler exits AMP_ERR_INPUT. stderr goes to err.txt. */
static void child(const char *dir, off_t cut, bool read_it, bool external) {
    char *mp = tu_path(dir, "model.onnx"), *wp = tu_path(dir, "w.bin"), *op = tu_path(dir, "out.onnx");
    char *ep = tu_path(dir, "err.txt");
    if (!freopen(ep, "w", stderr)) _exit(13);
    amp_sig_install("ampc");
    AmpStatus st = {0};
    AmpModel *m = NULL;
    if (amp_model_load_file(mp, NULL, &m, &st) != AMP_OK) _exit(10);
    AmpBytes bytes;
    if (amp_tensor_bytes(m, amp_graph_lookup(m->graph, "A")->initializer, &bytes, &st) != AMP_OK) _exit(11);
    if (truncate(wp, cut) != 0) _exit(12);
    if (read_it) {
        volatile float sum = 0;
        for (size_t i = 0; i < bytes.len / 4; i += 1024) sum += ((const float *)bytes.data)[i];
        (void)sum;
    }
    AmpSaveOptions so = {.external = external ? AMP_SAVE_EXTERNAL_ALWAYS : AMP_SAVE_EXTERNAL_NEVER,
                         .external_min_bytes = 1024};
    AmpCode rc = amp_model_save_file(m, op, &so, &st);
    if (rc != AMP_OK) fprintf(stderr, "ampc: %s\n", st.msg);
    fflush(stderr);
    _exit(rc);
}

static void cut_while_converting(off_t cut, bool read_it, bool external) {
    char *dir = tu_mkdtemp();
    write_model(dir);
    char *op = tu_path(dir, "out.onnx"), *ep = tu_path(dir, "err.txt");
    cr_assert(tu_write(op, old_out, sizeof old_out - 1));
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) child(dir, cut, read_it, external);
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    size_t len;
    char *err = (char *)tu_read(ep, &len);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == AMP_ERR_INPUT, "cut to %lld: the child %s %d, want exit %d: %s",
              (long long)cut, WIFSIGNALED(ws) ? "died of signal" : "exited",
              WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws), AMP_ERR_INPUT, err ? err : "");
    cr_assert(err && strstr(err, "w.bin: " AMP_SIG_CUT_SHORT), "the message names no file cut short: %s", err);
    free(err);
    char *got = (char *)tu_read(op, &len);
    cr_assert(got && len == sizeof old_out - 1 && memcmp(got, old_out, len) == 0,
              "OUT was replaced from a truncated mapping (%zu bytes)", len);
    free(got);
    /* Nothing left behind: the model, its cut data, OUT and the child's stderr. */
    cr_assert_eq(tu_count_entries(dir), 4, "a temporary file was left in %s", dir);
    tu_rmtree(dir);
    free(dir), free(op), free(ep);
}

Test(extdata_truncated, cut_to_nothing_then_saved) {
    cut_while_converting(0, false, false);
}

Test(extdata_truncated, cut_in_half_then_saved) {
    cut_while_converting(N * 2, false, false);
}

Test(extdata_truncated, cut_then_read_by_a_pass) {
    cut_while_converting(N * 2, true, false);
}

Test(extdata_truncated, cut_then_saved_with_a_data_file) {
    cut_while_converting(N * 2, false, true);
}
