/* NCCL's host side (kernels/cuda/nccl_comm.c), on any machine: the library opened with
 * dlopen (not linked: ampc's start does not load it), AMP_NCCL_LIB naming a file that is
 * not there is an error naming it, and the bootstrap's all-gather decides alike on every
 * rank: a rank that cannot use NCCL (no GPU here) leaves every rank without it (the host
 * then reduces), with no broadcast, while an asked-for library that does not open fails
 * that rank after it has answered the others. The collective itself needs a GPU
 * (scripts/gpu_checks.sh, stage nccl). */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <string.h>

#include "backend/comm.h"
#include "kernels/cuda/nccl_comm.h"

Test(nccl_host, the_library_is_not_linked) {
    cr_assert_null(dlopen(AMP_NCCL_SONAME, RTLD_NOLOAD | RTLD_LAZY), "libnccl is loaded before anything asked for it");
}

Test(nccl_host, a_path_that_is_not_there_is_named) {
    AmpStatus st = {0};
    cr_assert_eq(amp_nccl_load("/nonexistent/libnccl.so.2", &st), AMP_ERR_UNSUPPORTED);
    cr_assert(strstr(st.msg, "NCCL: cannot load /nonexistent/libnccl.so.2 (AMP_NCCL_LIB): "), "%s", st.msg);
}

Test(nccl_host, a_library_without_nccl_is_refused_by_function) {
    AmpStatus st = {0};
    /* a library that opens but is not NCCL: the first missing function is named */
    cr_assert_eq(amp_nccl_load("libm.so.6", &st), AMP_ERR_UNSUPPORTED);
    cr_assert(strstr(st.msg, "libm.so.6 has no function ncclGetVersion"), "%s", st.msg);
}

Test(nccl_host, the_library_loads_with_every_function) {
    AmpStatus st = {0};
    if (amp_nccl_load(NULL, &st)) cr_skip_test("libnccl not loadable here: %s", st.msg);
    cr_assert_eq(amp_nccl_load(NULL, &st), AMP_OK, "a second load answers as the first");
}

/* A two-rank host communicator whose other rank answers like this one (its all-gather
 * copies this rank's probe twice) and that counts its broadcasts. */
static int broadcasts;
static AmpCode twin_gather(AmpComm *c, const void *mine, size_t bytes, void *all, AmpStatus *st) {
    (void)st;
    for (int r = 0; r < c->size; r++) memcpy((char *)all + (size_t)r * bytes, mine, bytes);
    return AMP_OK;
}
static AmpCode count_bcast(AmpComm *c, void *buf, size_t bytes, int root, AmpStatus *st) {
    (void)c, (void)buf, (void)bytes, (void)root, (void)st;
    broadcasts++;
    return AMP_OK;
}

Test(nccl_host, ranks_that_cannot_all_use_nccl_reduce_on_the_host) {
    AmpComm *c = amp_comm_single();
    cr_assert_not_null(c);
    c->size = 2;
    c->allgather = twin_gather;
    c->broadcast = count_bcast;
    AmpNccl *n = (AmpNccl *)1;
    AmpStatus st = {0};
    /* no GPU here (or, with one, both "ranks" on it: a GPU twice) */
    cr_assert_eq(amp_nccl_open(c, NULL, &n, &st), AMP_OK, "%s", st.msg);
    cr_assert_null(n, "no NCCL communicator");
    cr_assert_eq(broadcasts, 0, "no unique id is sent when NCCL is not used");
    amp_comm_close(c);
}

Test(nccl_host, an_asked_for_library_that_does_not_open_fails_after_the_all_gather) {
    AmpComm *c = amp_comm_single();
    cr_assert_not_null(c);
    AmpNccl *n = (AmpNccl *)1;
    AmpStatus st = {0};
    cr_assert_eq(amp_nccl_open(c, "/nonexistent/libnccl.so.2", &n, &st), AMP_ERR_UNSUPPORTED);
    cr_assert_null(n);
    cr_assert(strstr(st.msg, "/nonexistent/libnccl.so.2 (AMP_NCCL_LIB)"), "%s", st.msg);
    amp_comm_close(c);
}
