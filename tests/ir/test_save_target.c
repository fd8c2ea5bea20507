/* Where amp_model_save_file writes: a regular file is replaced by a renamed temporary
 * file; a FIFO or a device is written straight into (a rename would replace the device
 * itself: `ampc m.onnx -o /dev/null` once turned /dev/null into a file); a symbolic link
 * to a file is followed and stays a link; a directory is an error. The FIFO tests stand in
 * for devices: a regression replaces a FIFO in a temporary folder, not /dev/null, and a
 * model under 64 KiB fits in the pipe's buffer, so no reader thread is needed and nothing
 * can block. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/dot.h"
#include "ir/ir.h"
#include "tests/ir/irtest_util.h"

typedef struct Fixture {
    char *dir;
    AmpModel *m;
    uint8_t *want; /* the model as amp_model_save_bytes writes it */
    size_t want_len;
} Fixture;

static Fixture setup(void) {
    Fixture f = {0};
    PbBuf pb = {0};
    onnx_small_model(&pb);
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_model_load_bytes(pb.data, pb.len, NULL, NULL, &f.m, &st), AMP_OK, "%s", st.msg);
    pb_free(&pb);
    cr_assert_eq(amp_model_save_bytes(f.m, &f.want, &f.want_len, &st), AMP_OK, "%s", st.msg);
    cr_assert_lt(f.want_len, (size_t)65536, "the FIFO tests need a model that fits a pipe's buffer");
    cr_assert_not_null(f.dir = tu_mkdtemp());
    return f;
}

static void teardown(Fixture *f) {
    tu_rmtree(f->dir);
    free(f->dir);
    free(f->want);
    amp_model_free(f->m);
}

/* A FIFO in the fixture's folder, opened for reading without blocking (so the save's
 * open for writing finds a reader). */
static int fifo_reader(const char *path) {
    cr_assert_eq(mkfifo(path, 0600), 0);
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    cr_assert_geq(fd, 0);
    return fd;
}

/* Everything in the pipe now (the writer has closed it). */
static uint8_t *drain(int fd, size_t *len) {
    uint8_t *buf = malloc(65536);
    *len = 0;
    ssize_t r;
    while ((r = read(fd, buf + *len, 65536 - *len)) > 0) *len += (size_t)r;
    return buf;
}

static bool is_fifo(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0 && S_ISFIFO(sb.st_mode);
}

Test(save_target, a_fifo_is_written_into_not_replaced) {
    Fixture f = setup();
    char *path = tu_path(f.dir, "out.onnx");
    int fd = fifo_reader(path);
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_model_save_file(f.m, path, NULL, &st), AMP_OK, "%s", st.msg);
    cr_assert(is_fifo(path), "the FIFO was replaced by a file");
    size_t len;
    uint8_t *got = drain(fd, &len);
    cr_assert_eq(len, f.want_len);
    cr_assert_eq(memcmp(got, f.want, len), 0);
    cr_assert_eq(tu_count_entries(f.dir), 1, "a temporary file was left beside the FIFO");
    close(fd);
    free(got);
    free(path);
    teardown(&f);
}

static bool refuse(void *ctx, AmpStatus *st) {
    (void)ctx;
    amp_fail(st, AMP_ERR_INPUT, "refused by the test");
    return false;
}

/* A save into a FIFO that must fail with `code`, saying `needle`: nothing reaches the
 * FIFO, it stays a FIFO, and nothing is made beside it. */
static void expect_refused_into_fifo(const AmpSaveOptions *so, AmpCode code, const char *needle) {
    Fixture f = setup();
    char *path = tu_path(f.dir, "out.onnx");
    int fd = fifo_reader(path);
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_model_save_file(f.m, path, so, &st), code, "%s", st.msg);
    cr_assert(tu_contains(st.msg, needle), "%s", st.msg);
    size_t len;
    uint8_t *got = drain(fd, &len);
    cr_assert_eq(len, 0, "%zu bytes written though the save failed", len);
    cr_assert(is_fifo(path));
    cr_assert_eq(tu_count_entries(f.dir), 1, "something was made beside the FIFO");
    close(fd);
    free(got);
    free(path);
    teardown(&f);
}

/* The verification beside the save decides before a byte reaches a stream. */
Test(save_target, a_refused_commit_writes_nothing_into_a_fifo) {
    AmpSaveOptions so = {.external_min_bytes = 1024, .commit = refuse};
    expect_refused_into_fifo(&so, AMP_ERR_INPUT, "refused by the test");
}

/* External data needs a file to sit beside: refused for a stream, and no `.data` made. */
Test(save_target, external_data_to_a_fifo_is_refused) {
    AmpSaveOptions so = {.external = AMP_SAVE_EXTERNAL_ALWAYS, .external_min_bytes = 16};
    expect_refused_into_fifo(&so, AMP_ERR_UNSUPPORTED, "not a regular file");
}

/* The file at path holds the fixture's model, byte for byte. */
static void assert_holds_model(const Fixture *f, const char *path) {
    size_t len = 0;
    uint8_t *got = tu_read(path, &len);
    cr_assert_not_null(got, "%s: cannot read", path);
    cr_assert_eq(len, f->want_len);
    cr_assert_eq(memcmp(got, f->want, len), 0);
    free(got);
}

/* A link to a file: the file gets the model, the link stays a link to it. */
Test(save_target, a_symlink_to_a_file_is_followed) {
    Fixture f = setup();
    char *file = tu_path(f.dir, "real.onnx"), *link = tu_path(f.dir, "link.onnx");
    cr_assert(tu_write(file, "old", 3));
    cr_assert_eq(symlink("real.onnx", link), 0);
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_model_save_file(f.m, link, NULL, &st), AMP_OK, "%s", st.msg);
    struct stat sb;
    cr_assert_eq(lstat(link, &sb), 0);
    cr_assert(S_ISLNK(sb.st_mode), "the link was replaced by a file");
    assert_holds_model(&f, file);
    cr_assert_eq(tu_count_entries(f.dir), 2, "a temporary file was left");
    free(file);
    free(link);
    teardown(&f);
}

/* A dangling link has no file to follow to: it is replaced by the model, as a new file. */
Test(save_target, a_dangling_symlink_is_replaced) {
    Fixture f = setup();
    char *link = tu_path(f.dir, "link.onnx");
    cr_assert_eq(symlink("missing.onnx", link), 0);
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_model_save_file(f.m, link, NULL, &st), AMP_OK, "%s", st.msg);
    struct stat sb;
    cr_assert_eq(lstat(link, &sb), 0);
    cr_assert(S_ISREG(sb.st_mode));
    assert_holds_model(&f, link);
    free(link);
    teardown(&f);
}

Test(save_target, a_directory_is_an_error) {
    Fixture f = setup();
    char *sub = tu_path(f.dir, "sub.onnx");
    cr_assert_eq(mkdir(sub, 0700), 0);
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_model_save_file(f.m, sub, NULL, &st), AMP_ERR_INPUT);
    cr_assert(tu_contains(st.msg, "is a directory"), "%s", st.msg);
    cr_assert_eq(tu_count_entries(f.dir), 1, "something was written beside the directory");
    cr_assert_eq(tu_count_entries(sub), 0, "something was written into the directory");
    free(sub);
    teardown(&f);
}

/* The DOT writer follows the same rule: `--dump-dot /dev/stdout` must not replace the
 * link in /dev. Into a FIFO it writes what it writes to any FILE. */
Test(save_target, the_dot_writer_writes_into_a_fifo) {
    Fixture f = setup();
    char *want = NULL;
    size_t want_len = 0;
    FILE *mem = open_memstream(&want, &want_len);
    cr_assert_not_null(mem);
    amp_dot_model(mem, f.m, NULL);
    cr_assert_eq(fclose(mem), 0);
    cr_assert_lt(want_len, (size_t)65536);
    char *path = tu_path(f.dir, "graph.dot");
    int fd = fifo_reader(path);
    AmpStatus st = {AMP_OK, ""};
    cr_assert_eq(amp_dot_model_file(path, f.m, NULL, &st), AMP_OK, "%s", st.msg);
    cr_assert(is_fifo(path), "the FIFO was replaced by a file");
    size_t len;
    uint8_t *got = drain(fd, &len);
    cr_assert_eq(len, want_len);
    cr_assert_eq(memcmp(got, want, len), 0);
    close(fd);
    free(got);
    free(want);
    free(path);
    teardown(&f);
}
