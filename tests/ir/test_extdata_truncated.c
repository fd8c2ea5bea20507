/* External data files are memory-mapped, not copied (issue 26, point 10): a data file cut
 * short while a model that maps it is converted makes the pages past its new end unreadable.
 * What is documented (docs/cli.md, "What a conversion does"): the process may die of SIGBUS
 * when such a page is read (by a pass, say), or the save fails with an I/O error (a big
 * tensor written from the mapping: write(2) reports EFAULT); either way OUT is never
 * written from a truncated mapping: it keeps its old contents, since the output is renamed
 * into place only once complete. These tests cut the file in a child process and check
 * that outcome, and OUT, from the parent. */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ir/ir.h"
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

/* In a child: load, cut w.bin to `cut` bytes, touch A when `read_it` (as a pass would),
 * save to out.onnx inline. Exits 0 when the save succeeded, 3 when it failed cleanly. */
static void child(const char *dir, off_t cut, bool read_it) {
    char *mp = tu_path(dir, "model.onnx"), *wp = tu_path(dir, "w.bin"), *op = tu_path(dir, "out.onnx");
    AmpStatus st = {0};
    AmpModel *m = NULL;
    if (amp_model_load_file(mp, NULL, &m, &st) != AMP_OK) _exit(10);
    AmpBytes bytes;
    if (amp_tensor_bytes(m, amp_graph_lookup(m->graph, "A")->initializer, &bytes, &st) != AMP_OK) _exit(11);
    if (truncate(wp, cut) != 0) _exit(12);
    if (read_it) {
        /* The default action, as in ampc: a sanitizer's own SIGBUS report would exit 1. */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigaction(SIGBUS, &sa, NULL);
        volatile float sum = 0;
        for (size_t i = 0; i < bytes.len / 4; i += 1024) sum += ((const float *)bytes.data)[i];
        (void)sum;
    }
    AmpSaveOptions so = {.external = AMP_SAVE_EXTERNAL_NEVER, .external_min_bytes = 1024};
    AmpCode rc = amp_model_save_file(m, op, &so, &st);
    if (rc != AMP_OK) fprintf(stderr, "save failed: %s\n", st.msg);
    _exit(rc == AMP_OK ? 0 : 3);
}

static void cut_while_converting(off_t cut, bool read_it) {
    char *dir = tu_mkdtemp();
    write_model(dir);
    char *op = tu_path(dir, "out.onnx");
    cr_assert(tu_write(op, old_out, sizeof old_out - 1));
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) child(dir, cut, read_it);
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    bool bus = WIFSIGNALED(ws) && WTERMSIG(ws) == SIGBUS;
    bool failed = WIFEXITED(ws) && WEXITSTATUS(ws) == 3;
    cr_assert(bus || failed, "cut to %lld: the child %s %d, want SIGBUS or a failed save", (long long)cut,
              WIFSIGNALED(ws) ? "died of signal" : "exited", WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
    cr_log_info("cut to %lld%s: %s", (long long)cut, read_it ? " and read" : "", bus ? "SIGBUS" : "the save failed");
    size_t len;
    char *got = (char *)tu_read(op, &len);
    cr_assert(got && len == sizeof old_out - 1 && memcmp(got, old_out, len) == 0,
              "OUT was replaced from a truncated mapping (%zu bytes)", len);
    free(got);
    tu_rmtree(dir);
    free(dir), free(op);
}

Test(extdata_truncated, cut_to_nothing_then_saved) {
    cut_while_converting(0, false);
}

Test(extdata_truncated, cut_in_half_then_saved) {
    cut_while_converting(N * 2, false);
}

Test(extdata_truncated, cut_then_read_by_a_pass) {
    cut_while_converting(N * 2, true);
}
