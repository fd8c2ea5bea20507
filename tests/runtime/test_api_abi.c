/* The public API's promises of compatibility (include/ampc/ampc.h, "Options structs";
 * issue 39): an options struct carries its size, so a program built against an older header
 * runs with this library (the fields it lacks take their defaults), one built against a newer
 * header that sets a field this library lacks is refused rather than ignored, and a zeroed
 * struct (struct_size 0, version 0.1's callers) still means the defaults; amp_version()
 * answers for the library linked. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <string.h>

#include "tests/runtime/rt_util.h"

/* What a caller compiled against a newer ampc.h hands in: this header's struct and a field
 * after it. */
typedef struct NewerOptions {
    AmpSessionOptions known;
    int64_t later_field;
} NewerOptions;

static AmpCode open_with(const AmpSessionOptions *o, AmpStatus *st) {
    AmpSession *s = NULL;
    uint8_t *bytes = NULL;
    size_t len = 0;
    AmpModel *m = rt_matmul_relu();
    cr_assert_eq(amp_model_save_bytes(m, &bytes, &len, st), AMP_OK, "%s", st->msg);
    amp_model_free(m);
    AmpCode rc = amp_session_open_bytes(bytes, len, NULL, o, &s, st);
    free(bytes);
    amp_session_close(s);
    return rc;
}

Test(api_abi, version_matches_the_header) {
    cr_assert_str_eq(amp_version(), AMPC_VERSION_STRING);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", AMPC_VERSION_MAJOR, AMPC_VERSION_MINOR, AMPC_VERSION_PATCH);
    cr_assert_str_eq(AMPC_VERSION_STRING, want);
    cr_assert_eq(AMPC_VERSION_NUMBER, AMPC_VERSION_MAJOR * 10000 + AMPC_VERSION_MINOR * 100 + AMPC_VERSION_PATCH);
}

Test(api_abi, init_sets_the_size_and_defaults) {
    AmpSessionOptions a, b = AMP_SESSION_OPTIONS_INIT;
    memset(&a, 0xab, sizeof a);
    amp_session_options_init(&a);
    cr_assert_eq(a.struct_size, sizeof(AmpSessionOptions));
    cr_assert_eq(memcmp(&a, &b, sizeof a), 0, "amp_session_options_init is AMP_SESSION_OPTIONS_INIT");
    cr_assert_null(a.precision);
    cr_assert_eq(a.threads, 0);
    AmpStatus st = {0};
    cr_assert_eq(open_with(&a, &st), AMP_OK, "%s", st.msg);
}

Test(api_abi, zeroed_struct_is_version_0_1) {
    AmpSessionOptions o = {0};
    o.ignore_env = true;
    o.backend = AMP_BACKEND_CPU;
    AmpStatus st = {0};
    cr_assert_eq(open_with(&o, &st), AMP_OK, "%s", st.msg);
    /* A field of 0.1 given through a zeroed struct is read: a bad precision is refused. */
    o.amp_auto = "1";
    o.precision = "fp8";
    st = (AmpStatus){0};
    cr_assert_eq(open_with(&o, &st), AMP_ERR_USAGE);
    cr_assert(strstr(st.msg, "fp8"), "%s", st.msg);
}

Test(api_abi, newer_caller_with_a_later_field_set_is_refused) {
    NewerOptions n;
    memset(&n, 0, sizeof n);
    n.known.struct_size = sizeof n;
    n.known.ignore_env = true;
    AmpStatus st = {0};
    cr_assert_eq(open_with(&n.known, &st), AMP_OK, "later fields at their defaults: %s", st.msg);
    n.later_field = 7;
    st = (AmpStatus){0};
    cr_assert_eq(open_with(&n.known, &st), AMP_ERR_USAGE);
    cr_assert(strstr(st.msg, "AmpSessionOptions") && strstr(st.msg, "newer ampc"), "%s", st.msg);
}

Test(api_abi, impossible_sizes_are_refused) {
    AmpSessionOptions o = AMP_SESSION_OPTIONS_INIT;
    o.struct_size = 3;
    AmpStatus st = {0};
    cr_assert_eq(open_with(&o, &st), AMP_ERR_USAGE);
    cr_assert(strstr(st.msg, "struct_size 3"), "%s", st.msg);
}

Test(api_abi, export_options_carry_their_size_too) {
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(rt_matmul_relu(), NULL, &s, &st), AMP_OK, "%s", st.msg);
    struct {
        AmpExportOptions known;
        int later_field;
    } n;
    memset(&n, 0, sizeof n);
    n.known.struct_size = sizeof n;
    n.later_field = 1;
    cr_assert_eq(amp_session_export(s, "/nonexistent/out.onnx", &n.known, &st), AMP_ERR_USAGE);
    cr_assert(strstr(st.msg, "AmpExportOptions"), "%s", st.msg);
    amp_session_close(s);
}

/* Data parallel (docs/parallel.md): the fields appended after `threads`; a caller built
 * before them (struct_size ending at threads) still opens; data_parallel OFF opens no
 * communicator; a value past the enum is refused naming the field. */
Test(api_abi, data_parallel_fields_are_appended) {
    cr_assert_gt(offsetof(AmpSessionOptions, data_parallel), offsetof(AmpSessionOptions, threads));
    cr_assert_gt(offsetof(AmpSessionOptions, comm_timeout), offsetof(AmpSessionOptions, data_parallel));
    cr_assert_gt(offsetof(AmpSessionOptions, loss), offsetof(AmpSessionOptions, comm_timeout)); /* then the loss */
    AmpSessionOptions o = AMP_SESSION_OPTIONS_INIT;
    o.ignore_env = true;
    o.struct_size = offsetof(AmpSessionOptions, data_parallel);
    AmpStatus st = {0};
    cr_assert_eq(open_with(&o, &st), AMP_OK, "a caller of the fields before data parallelism: %s", st.msg);
    o.struct_size = sizeof o;
    o.data_parallel = AMP_DATA_PARALLEL_OFF;
    cr_assert_eq(open_with(&o, &st), AMP_OK, "%s", st.msg);
    o.data_parallel = 7;
    st = (AmpStatus){0};
    cr_assert_eq(open_with(&o, &st), AMP_ERR_USAGE);
    cr_assert(strstr(st.msg, "data_parallel 7"), "%s", st.msg);
}

/* AmpSessionStats is an output: amp_session_stats (what a 0.1 program calls) writes version
 * 0.1's fields and not a byte past them; amp_session_stats_sized writes the size given. */
Test(api_abi, stats_write_only_what_the_caller_knows) {
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(rt_open(rt_matmul_relu(), NULL, &s, &st), AMP_OK, "%s", st.msg);
    size_t v01 = offsetof(AmpSessionStats, amp_precision_why) + sizeof(const char *);
    unsigned char buf[sizeof(AmpSessionStats) + 16];
    memset(buf, 0xab, sizeof buf);
    amp_session_stats(s, (AmpSessionStats *)buf);
    for (size_t i = v01; i < sizeof buf; i++) cr_assert_eq(buf[i], 0xab, "amp_session_stats wrote byte %zu", i);
    cr_assert_not_null(((AmpSessionStats *)buf)->backend);
    memset(buf, 0xab, sizeof buf);
    amp_session_stats_sized(s, (AmpSessionStats *)buf, sizeof(AmpSessionStats));
    for (size_t i = sizeof(AmpSessionStats); i < sizeof buf; i++) cr_assert_eq(buf[i], 0xab, "byte %zu", i);
    AmpSessionStats all;
    memcpy(&all, buf, sizeof all);
    cr_assert_str_eq(all.loss_name, "");
    cr_assert(all.loss != all.loss && all.loss_scale != all.loss_scale, "NaN without a loss or loss scaling");
    cr_assert_eq(all.skipped_steps, 0);
    cr_assert_eq(all.peak_bytes, all.intermediate_bytes + all.state_bytes);
    amp_session_close(s);
}
