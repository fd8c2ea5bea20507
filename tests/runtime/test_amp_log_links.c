/* AMP_LOG_PATH in a shared folder (issue 26, point 8): symlinks planted under the log
 * files' names, to files of someone else's or to names not there yet, are never written
 * through; the links are replaced by the logs, and what they pointed at is left as it was.
 * A log folder that is itself a symlink is refused. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "tests/ir/irtest_util.h"
#include "runtime/amp_auto.h"
#include "tests/runtime/rt_util.h"

static const char *const names[] = {"before.onnx", "after.onnx", "before.txt",
                                    "after.txt",   "summary.txt", "paint.txt"};
enum { N_NAMES = 6 };
static const char precious[] = "someone else's file\n";

static char *root, *logdir, *victims;

static void setup(void) {
    unsetenv("AMP_LOG_PATH");
    unsetenv("AMP_PRECISION");
    root = tu_mkdtemp();
    cr_assert_not_null(root);
    logdir = tu_path(root, "log");
    victims = tu_path(root, "victims");
    cr_assert_eq(mkdir(logdir, 0755), 0);
    cr_assert_eq(mkdir(victims, 0755), 0);
}

static void teardown(void) {
    tu_rmtree(root);
    free(root), free(logdir), free(victims);
}

TestSuite(amp_log_links, .init = setup, .fini = teardown);

static AmpCode open_logged(const char *log_path, AmpStatus *st) {
    AmpModel *m = rt_matmul_relu();
    AmpSessionOptions o = {.amp_auto = "1", .ignore_env = true, .log_path = log_path};
    AmpSession *s = NULL;
    AmpCode rc = rt_open(m, &o, &s, st);
    if (s) amp_session_close(s);
    return rc;
}

/* Each log name is a link: even ones to existing files, odd ones dangling. */
Test(amp_log_links, planted_links_are_not_followed) {
    char *victim[N_NAMES], *link[N_NAMES];
    for (size_t i = 0; i < N_NAMES; i++) {
        victim[i] = tu_path(victims, names[i]);
        link[i] = tu_path(logdir, names[i]);
        if (i % 2 == 0) cr_assert(tu_write(victim[i], precious, sizeof precious - 1));
        cr_assert_eq(symlink(victim[i], link[i]), 0);
    }
    for (int run = 0; run < 2; run++) { /* the second run replaces the first one's logs */
        AmpStatus st = {0};
        cr_assert_eq(open_logged(logdir, &st), AMP_OK, "%s", st.msg);
        for (size_t i = 0; i < N_NAMES; i++) {
            struct stat sb;
            cr_assert_eq(lstat(link[i], &sb), 0);
            cr_assert(S_ISREG(sb.st_mode), "%s is still a link (run %d)", names[i], run);
            cr_assert_gt(sb.st_size, 0, "%s is empty", names[i]);
            if (i % 2 == 0) {
                size_t len;
                char *got = (char *)tu_read(victim[i], &len);
                cr_assert(got && len == sizeof precious - 1 && memcmp(got, precious, len) == 0,
                          "the log was written through the link into %s", victim[i]);
                free(got);
            } else {
                cr_assert_not(tu_exists(victim[i]), "the dangling link's target %s was created", victim[i]);
            }
        }
    }
    for (size_t i = 0; i < N_NAMES; i++) free(victim[i]), free(link[i]);
}

/* A log folder that is a link (say /tmp/amp_log planted to point into someone's home)
 * is refused before anything is written through it. */
Test(amp_log_links, a_linked_log_folder_is_refused) {
    char *link = tu_path(root, "linked");
    cr_assert_eq(symlink(victims, link), 0);
    AmpStatus st = {0};
    cr_assert_eq(open_logged(link, &st), AMP_ERR_USAGE, "%s", st.msg);
    cr_assert_not_null(strstr(st.msg, "AMP_LOG_PATH"), "%s", st.msg);
    cr_assert_not_null(strstr(st.msg, "symbolic link"), "%s", st.msg);
    cr_assert_eq(tu_count_entries(victims), 0, "files were written through the linked folder");
    free(link);
}
