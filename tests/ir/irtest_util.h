/* Helpers shared by the loader/saver tests (test_roundtrip.c, test_bad_input.c,
 * test_bad_graph.c, test_extdata.c): a tiny protobuf writer to build ONNX bytes by hand
 * (valid or hostile), temporary folders and files, and running the ampc binary with its
 * stderr captured. */
#ifndef AMP_IRTEST_UTIL_H
#define AMP_IRTEST_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- protobuf writer ------------------------------------------------------------- */

typedef struct PbBuf {
    uint8_t *data;
    size_t len, cap;
} PbBuf;

enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_I32 = 5 };

static inline void pb_raw(PbBuf *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n) cap *= 2;
        uint8_t *d = realloc(b->data, cap);
        if (!d) abort(); /* test helper: no way to continue */
        b->data = d;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
}

static inline void pb_varint(PbBuf *b, uint64_t v) {
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) tmp[n] |= 0x80;
        n++;
    } while (v);
    pb_raw(b, tmp, n);
}

static inline void pb_key(PbBuf *b, uint32_t field, int wire) {
    pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire);
}
/* A varint field (int32/int64/enum; negatives take 10 bytes as protobuf does). */
static inline void pb_int(PbBuf *b, uint32_t field, int64_t v) {
    pb_key(b, field, PB_VARINT);
    pb_varint(b, (uint64_t)v);
}
static inline void pb_bytes(PbBuf *b, uint32_t field, const void *p, size_t n) {
    pb_key(b, field, PB_LEN);
    pb_varint(b, n);
    pb_raw(b, p, n);
}
static inline void pb_str(PbBuf *b, uint32_t field, const char *s) {
    pb_bytes(b, field, s, strlen(s));
}
static inline void pb_f32(PbBuf *b, uint32_t field, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint8_t le[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    pb_key(b, field, PB_I32);
    pb_raw(b, le, 4);
}
static inline void pb_free(PbBuf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
/* Writes `sub` as a length-delimited field and frees it. */
static inline void pb_msg(PbBuf *b, uint32_t field, PbBuf *sub) {
    pb_bytes(b, field, sub->data, sub->len);
    pb_free(sub);
}

/* ---- ONNX messages (field numbers from onnx.proto) --------------------------------- */

/* ModelProto */
enum { M_IR_VERSION = 1, M_PRODUCER_NAME = 2, M_PRODUCER_VERSION = 3, M_DOMAIN = 4,
       M_MODEL_VERSION = 5, M_DOC = 6, M_GRAPH = 7, M_OPSET = 8, M_METADATA = 14,
       M_TRAINING = 20, M_FUNCTIONS = 25 };
/* GraphProto */
enum { G_NODE = 1, G_NAME = 2, G_INIT = 5, G_DOC = 10, G_INPUT = 11, G_OUTPUT = 12,
       G_VALUE_INFO = 13, G_QUANT = 14, G_SPARSE_INIT = 15 };
/* NodeProto */
enum { N_INPUT = 1, N_OUTPUT = 2, N_NAME = 3, N_OP = 4, N_ATTR = 5, N_DOC = 6, N_DOMAIN = 7 };
/* AttributeProto */
enum { A_NAME = 1, A_F = 2, A_I = 3, A_S = 4, A_T = 5, A_G = 6, A_FLOATS = 7, A_INTS = 8,
       A_STRINGS = 9, A_DOC = 13, A_TYPE = 20 };
/* TensorProto */
enum { T_DIMS = 1, T_DTYPE = 2, T_FLOAT = 4, T_INT32 = 5, T_STRING = 6, T_INT64 = 7,
       T_NAME = 8, T_RAW = 9, T_EXTERNAL = 13, T_LOCATION = 14 };

/* An OperatorSetIdProto written into a ModelProto. */
static inline void onnx_opset(PbBuf *model, const char *domain, int64_t version) {
    PbBuf o = {0};
    if (domain) pb_str(&o, 1, domain);
    pb_int(&o, 2, version);
    pb_msg(model, M_OPSET, &o);
}

/* A tensor-typed ValueInfoProto, written as `field` (G_INPUT, G_OUTPUT, G_VALUE_INFO)
 * of a graph. dims[i] < 0 writes no dim_value (unknown). ndims < 0: no shape. */
static inline void onnx_vi(PbBuf *graph, uint32_t field, const char *name, int dtype, int ndims,
                           const int64_t *dims) {
    PbBuf shape = {0}, tt = {0}, tp = {0}, vi = {0};
    for (int i = 0; i < ndims; i++) {
        PbBuf d = {0};
        if (dims[i] >= 0) pb_int(&d, 1, dims[i]);
        pb_msg(&shape, 1, &d);
    }
    pb_int(&tt, 1, dtype);
    if (ndims >= 0) pb_msg(&tt, 2, &shape);
    else pb_free(&shape);
    pb_msg(&tp, 1, &tt);
    pb_str(&vi, 1, name);
    pb_msg(&vi, 2, &tp);
    pb_msg(graph, field, &vi);
}

/* A NodeProto with the given inputs/outputs ("" = left out) and pre-built attributes
 * (AttributeProto messages concatenated with field N_ATTR; may be NULL). */
static inline void onnx_node(PbBuf *graph, const char *op, const char *name, int n_in,
                             const char *const *ins, int n_out, const char *const *outs,
                             PbBuf *attrs) {
    PbBuf n = {0};
    for (int i = 0; i < n_in; i++) pb_str(&n, N_INPUT, ins[i]);
    for (int i = 0; i < n_out; i++) pb_str(&n, N_OUTPUT, outs[i]);
    if (name) pb_str(&n, N_NAME, name);
    pb_str(&n, N_OP, op);
    if (attrs) {
        pb_raw(&n, attrs->data, attrs->len);
        pb_free(attrs);
    }
    pb_msg(graph, G_NODE, &n);
}

/* Appends an AttributeProto (as field N_ATTR) to `attrs`. */
static inline void onnx_attr_int(PbBuf *attrs, const char *name, int64_t v) {
    PbBuf a = {0};
    pb_str(&a, A_NAME, name);
    pb_int(&a, A_I, v);
    pb_int(&a, A_TYPE, 2);
    pb_msg(attrs, N_ATTR, &a);
}
static inline void onnx_attr_float(PbBuf *attrs, const char *name, float v) {
    PbBuf a = {0};
    pb_str(&a, A_NAME, name);
    pb_f32(&a, A_F, v);
    pb_int(&a, A_TYPE, 1);
    pb_msg(attrs, N_ATTR, &a);
}
/* `tensor` is a TensorProto body; it is consumed. */
static inline void onnx_attr_tensor(PbBuf *attrs, const char *name, PbBuf *tensor) {
    PbBuf a = {0};
    pb_str(&a, A_NAME, name);
    pb_msg(&a, A_T, tensor);
    pb_int(&a, A_TYPE, 4);
    pb_msg(attrs, N_ATTR, &a);
}
/* `graph` is a GraphProto body; it is consumed. */
static inline void onnx_attr_graph(PbBuf *attrs, const char *name, PbBuf *graph) {
    PbBuf a = {0};
    pb_str(&a, A_NAME, name);
    pb_msg(&a, A_G, graph);
    pb_int(&a, A_TYPE, 5);
    pb_msg(attrs, N_ATTR, &a);
}

/* A TensorProto body with dims and dtype (no data yet). */
static inline void onnx_tensor_head(PbBuf *t, const char *name, int dtype, int ndims,
                                    const int64_t *dims) {
    for (int i = 0; i < ndims; i++) pb_int(t, T_DIMS, dims[i]);
    pb_int(t, T_DTYPE, dtype);
    if (name) pb_str(t, T_NAME, name);
}
static inline void onnx_str_entry(PbBuf *msg, uint32_t field, const char *k, const char *v) {
    PbBuf e = {0};
    pb_str(&e, 1, k);
    pb_str(&e, 2, v);
    pb_msg(msg, field, &e);
}
/* A TensorProto body whose data is external: location, offset, length (< 0 = absent). */
static inline void onnx_tensor_external(PbBuf *t, const char *location, int64_t offset,
                                        int64_t length) {
    char num[32];
    onnx_str_entry(t, T_EXTERNAL, "location", location);
    if (offset >= 0) {
        snprintf(num, sizeof num, "%lld", (long long)offset);
        onnx_str_entry(t, T_EXTERNAL, "offset", num);
    }
    if (length >= 0) {
        snprintf(num, sizeof num, "%lld", (long long)length);
        onnx_str_entry(t, T_EXTERNAL, "length", num);
    }
    pb_int(t, T_LOCATION, 1);
}

/* Wraps a GraphProto body into a ModelProto (ir_version 8, ai.onnx `opset`). */
static inline void onnx_model(PbBuf *model, PbBuf *graph, int64_t opset) {
    pb_int(model, M_IR_VERSION, 8);
    pb_str(model, M_PRODUCER_NAME, "ampc-tests");
    pb_msg(model, M_GRAPH, graph);
    onnx_opset(model, "", opset);
}

/* The small valid model most cases start from:
 *   Y = Relu(Gemm(X, W, B, alpha=0.5, transB=1)); X (2,3) input, W (4,3) and B (4) float
 *   initializers (raw_data and float_data respectively), Y (2,4) output. */
static inline void onnx_small_model(PbBuf *out) {
    PbBuf g = {0}, attrs = {0}, w = {0}, bt = {0};
    const int64_t xd[2] = {2, 3}, wd[2] = {4, 3}, bd[1] = {4}, yd[2] = {2, 4};
    float wv[12], bv[4];
    for (int i = 0; i < 12; i++) wv[i] = (float)i * 0.25f - 1.0f;
    for (int i = 0; i < 4; i++) bv[i] = (float)i;
    onnx_attr_float(&attrs, "alpha", 0.5f);
    onnx_attr_int(&attrs, "transB", 1);
    const char *gi[3] = {"X", "W", "B"}, *go[1] = {"G"}, *ri[1] = {"G"}, *ro[1] = {"Y"};
    onnx_node(&g, "Gemm", "gemm0", 3, gi, 1, go, &attrs);
    onnx_node(&g, "Relu", "relu0", 1, ri, 1, ro, NULL);
    pb_str(&g, G_NAME, "small");
    onnx_tensor_head(&w, "W", 1, 2, wd);
    pb_bytes(&w, T_RAW, wv, sizeof wv); /* little-endian hosts only, as is ONNX */
    pb_msg(&g, G_INIT, &w);
    onnx_tensor_head(&bt, "B", 1, 1, bd);
    {
        PbBuf packed = {0};
        for (int i = 0; i < 4; i++) pb_raw(&packed, &bv[i], 4);
        pb_msg(&bt, T_FLOAT, &packed);
    }
    pb_msg(&g, G_INIT, &bt);
    onnx_vi(&g, G_INPUT, "X", 1, 2, xd);
    onnx_vi(&g, G_OUTPUT, "Y", 1, 2, yd);
    onnx_model(out, &g, 13);
}

/* ---- files and folders ----------------------------------------------------------- */

/* A fresh folder under TMPDIR (or /tmp); the caller frees the string. */
static inline char *tu_mkdtemp(void) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    size_t n = strlen(base) + 32;
    char *p = malloc(n);
    if (!p) abort();
    snprintf(p, n, "%s/ampc_test_XXXXXX", base);
    if (!mkdtemp(p)) {
        free(p);
        return NULL;
    }
    return p;
}

static inline char *tu_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p) abort();
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* Removes a folder tree (symlinks are removed, never followed). */
static inline void tu_rmtree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char *sub = tu_path(path, e->d_name);
                tu_rmtree(sub);
                free(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

static inline int tu_cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every <testdata>/<category>/<test>/model.onnx of the ONNX conformance data, sorted;
 * the caller frees each path and the array. */
static inline char **tu_list_testdata_models(const char *testdata, size_t *count) {
    static const char *const cats[] = {"node", "simple", "pytorch-converted", "pytorch-operator", "real"};
    char **paths = NULL;
    size_t n = 0, cap = 0;
    for (size_t c = 0; c < sizeof cats / sizeof cats[0]; c++) {
        char *catdir = tu_path(testdata, cats[c]);
        DIR *d = opendir(catdir);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (e->d_name[0] == '.') continue;
                char *tdir = tu_path(catdir, e->d_name);
                char *mp = tu_path(tdir, "model.onnx");
                free(tdir);
                struct stat sb;
                if (stat(mp, &sb) != 0 || !S_ISREG(sb.st_mode)) {
                    free(mp);
                    continue;
                }
                if (n == cap) {
                    cap = cap ? cap * 2 : 256;
                    paths = realloc(paths, cap * sizeof *paths);
                    if (!paths) abort();
                }
                paths[n++] = mp;
            }
            closedir(d);
        }
        free(catdir);
    }
    if (n) qsort(paths, n, sizeof *paths, tu_cmp_str);
    *count = n;
    return paths;
}

static inline bool tu_write(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

/* Reads a whole file into a malloc'd buffer (NUL-terminated for convenience). */
static inline uint8_t *tu_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap + 1);
    if (!buf) abort();
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            uint8_t *nb = realloc(buf, cap + 1);
            if (!nb) abort();
            buf = nb;
        }
    }
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

/* Number of entries in a folder (not counting . and ..), -1 on error. */
static inline int tu_count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static inline bool tu_exists(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

/* Case-insensitive substring search. */
static inline bool tu_contains(const char *hay, const char *needle) {
    size_t nl = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < nl && hay[i]) {
            char a = hay[i], b = needle[i];
            if (a >= 'A' && a <= 'Z') a = (char)(a - 'A' + 'a');
            if (b >= 'A' && b <= 'Z') b = (char)(b - 'A' + 'a');
            if (a != b) break;
            i++;
        }
        if (i == nl) return true;
    }
    return nl == 0;
}

/* Runs argv (argv[0] is the program path) with stdout and stderr captured into
 * malloc'd strings; returns the exit status, or -1 if it did not exit normally
 * (signal), -2 if it could not be started. */
static inline int tu_run(char *const argv[], char **out, char **err) {
    char tmpl_o[] = "/tmp/ampc_out_XXXXXX", tmpl_e[] = "/tmp/ampc_err_XXXXXX";
    int fo = mkstemp(tmpl_o), fe = mkstemp(tmpl_e);
    if (fo < 0 || fe < 0) return -2;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -2;
    if (pid == 0) {
        dup2(fo, 1);
        dup2(fe, 2);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    close(fo);
    close(fe);
    size_t n;
    char *o = (char *)tu_read(tmpl_o, &n);
    char *e = (char *)tu_read(tmpl_e, &n);
    unlink(tmpl_o);
    unlink(tmpl_e);
    if (out) *out = o;
    else free(o);
    if (err) *err = e;
    else free(e);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return -1;
}

/* Kills the calling test with SIGALRM after `seconds` (Criterion reports it as a crash):
 * hang detection without Criterion's .timeout, which leaks in the runner under ASan when
 * tests run with --jobs 2 (a 48-byte LeakSanitizer report fails the whole executable). */
static inline void tu_watchdog(unsigned seconds) {
    alarm(seconds);
}

/* Number of '\n'-terminated lines in s (a last line without '\n' counts too). */
static inline int tu_count_lines(const char *s) {
    if (!s || !*s) return 0;
    int n = 0;
    for (const char *p = s; *p; p++)
        if (*p == '\n') n++;
    if (s[strlen(s) - 1] != '\n') n++;
    return n;
}

#endif
