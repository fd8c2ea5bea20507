/* A program built against the installed ampc package (tests/install/test_install.sh):
 * opens MODEL twice, as it is and rewritten in mixed precision (amp_auto "1"), feeds its one
 * float input a deterministic pattern, runs both and prints the first output's values of
 * the FP32 run, one per line, then the largest difference of the AMP run to stderr.
 * usage: demo MODEL DIM... (the input's dims) */
#include <ampc/ampc.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const AmpStatus *st) {
    fprintf(stderr, "demo: %s\n", st->msg);
    return 1;
}

static int run(const char *path, const char *amp_auto, const AmpTensorView *in, AmpTensorView *out) {
    AmpStatus st = {AMP_OK, ""};
    AmpSessionOptions so = AMP_SESSION_OPTIONS_INIT;
    so.backend = AMP_BACKEND_CPU;
    so.amp_auto = amp_auto;
    so.ignore_env = true;
    AmpSession *s = NULL;
    if (amp_session_open(path, &so, &s, &st)) return fail(&st);
    AmpCode rc = amp_session_run(s, in, 1, NULL, 1, out, &st);
    amp_session_close(s);
    return rc ? fail(&st) : 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc - 2 > AMP_TENSOR_MAX_RANK) {
        fprintf(stderr, "usage: demo MODEL DIM...\n");
        return 2;
    }
    /* The library linked is the one the headers describe. */
    if (strcmp(amp_version(), AMPC_VERSION_STRING) != 0) {
        fprintf(stderr, "demo: linked ampc %s, compiled against %s\n", amp_version(), AMPC_VERSION_STRING);
        return 1;
    }
    AmpTensorView in = {.name = "x", .dtype = 1, .rank = argc - 2};
    size_t n = 1;
    for (int d = 0; d < in.rank; d++) n *= (size_t)(in.dims[d] = atoll(argv[2 + d]));
    float *x = malloc(n * sizeof *x);
    if (!x) return 1;
    for (size_t i = 0; i < n; i++) x[i] = (float)sin(0.1 * (double)i);
    in.data = x;
    AmpTensorView f = {0}, a = {0};
    int rc = run(argv[1], "0", &in, &f);
    if (!rc) rc = run(argv[1], "1", &in, &a);
    if (!rc && (f.dtype != 1 || a.dtype != 1 || amp_tensor_view_bytes(&f) != amp_tensor_view_bytes(&a))) {
        fprintf(stderr, "demo: the outputs differ in type or size\n");
        rc = 1;
    }
    if (!rc) {
        const float *y = f.data, *z = a.data;
        size_t m = amp_tensor_view_bytes(&f) / sizeof(float);
        double diff = 0, scale = 0;
        for (size_t i = 0; i < m; i++) {
            printf("%.9g\n", y[i]);
            diff = fmax(diff, fabs((double)y[i] - z[i]));
            scale = fmax(scale, fabs((double)y[i]));
        }
        fprintf(stderr, "demo: %zu outputs, AMP max rel difference %.3g\n", m, scale > 0 ? diff / scale : diff);
    }
    amp_tensor_view_free(&f);
    amp_tensor_view_free(&a);
    free(x);
    return rc;
}
