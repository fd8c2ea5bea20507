/* Einsum's geometry: the equation parsed against the inputs' ranks and sizes
 * (ops/einsum_geom.h). */
#include <string.h>

#include "ops/einsum_geom.h"
#include "ops/kernel_out.h"

#define N_LETTERS AMP_EINSUM_LETTERS
#define N_LABELS AMP_EINSUM_LABELS
#define MAX_OPS AMP_EINSUM_MAX_OPS

typedef AmpEinsumTerm Term;
typedef AmpEinsumGeom Eq;

static int letter(char c) {
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
    return -1;
}

/* Parses one term (s, len) of an operand of rank `rank` (-1 for the output). */
static bool parse_term(AmpKernelCtx *k, const char *s, size_t len, int rank, int n_ell, Term *t, int *ell_out) {
    int letters = 0, ell_at = -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            if (ell_at >= 0 || i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.') {
                amp_kernel_fail(k, AMP_ERR_INPUT, "bad ellipsis in equation term '%.*s'", (int)len, s);
                return false;
            }
            ell_at = letters;
            i += 2;
        } else if (letter(s[i]) >= 0) {
            letters++;
        } else if (s[i] != ' ') {
            amp_kernel_fail(k, AMP_ERR_INPUT, "equation character '%c' is not a label", s[i]);
            return false;
        }
    }
    int ell = 0;
    if (rank >= 0) {
        ell = rank - letters;
        if (ell < 0 || (ell > 0 && ell_at < 0)) {
            amp_kernel_fail(k, AMP_ERR_INPUT, "equation term '%.*s' does not match an input of rank %d", (int)len, s,
                          rank);
            return false;
        }
    } else if (ell_at >= 0) {
        ell = n_ell;
    }
    if (letters + ell > AMP_MAX_RANK) {
        amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "equation term '%.*s' has over %d axes", (int)len, s, AMP_MAX_RANK);
        return false;
    }
    t->rank = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            /* This operand's ellipsis dims are the last `ell` of the global ones. */
            int first = rank >= 0 ? n_ell - ell : 0;
            for (int j = 0; j < ell; j++) t->lab[t->rank++] = N_LETTERS + first + j;
            i += 2;
        } else if (letter(s[i]) >= 0) {
            t->lab[t->rank++] = letter(s[i]);
        }
    }
    if (ell_out) *ell_out = ell;
    return true;
}

static AmpCode parse(AmpKernelCtx *k, const char *eqs, Eq *e) {
    memset(e, 0, sizeof *e);
    e->n_ops = k->n_in;
    if (k->n_in < 1 || k->n_in > MAX_OPS)
        return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "%d operands; 1 to %d are supported", k->n_in, MAX_OPS);
    for (int i = 0; i < k->n_in; i++)
        if (!k->in[i]) return amp_kernel_fail(k, AMP_ERR_INPUT, "input %d is missing", i);
    const char *arrow = strstr(eqs, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eqs) : strlen(eqs);
    /* Pass 1: the widest ellipsis. Pass 2: the labels, right-aligning ellipsis dims. */
    for (int pass = 0; pass < 2; pass++) {
        const char *p = eqs;
        for (int op = 0; op < e->n_ops; op++) {
            const char *end = memchr(p, ',', lhs_len - (size_t)(p - eqs));
            if (op == e->n_ops - 1) {
                if (end) return amp_kernel_fail(k, AMP_ERR_INPUT, "equation '%s' has more terms than inputs", eqs);
                end = eqs + lhs_len;
            } else if (!end) {
                return amp_kernel_fail(k, AMP_ERR_INPUT, "equation '%s' has fewer terms than inputs", eqs);
            }
            int ell;
            if (!parse_term(k, p, (size_t)(end - p), k->in[op]->rank, e->n_ell, &e->in[op], &ell))
                return k->st->code;
            if (pass == 0 && ell > e->n_ell) e->n_ell = ell;
            p = end + 1;
        }
    }
    for (int l = 0; l < N_LABELS; l++) e->size[l] = -1;
    for (int op = 0; op < e->n_ops; op++)
        for (int a = 0; a < e->in[op].rank; a++) {
            int l = e->in[op].lab[a];
            int64_t d = k->in[op]->dims[a];
            e->in_op[l][op] = true;
            if (e->size[l] < 0 || e->size[l] == 1) e->size[l] = d;
            else if (d != 1 && d != e->size[l])
                return amp_kernel_fail(k, AMP_ERR_INPUT, "label '%c' has sizes %lld and %lld",
                                     l < 26 ? 'a' + l : l < N_LETTERS ? 'A' + l - 26 : '.', (long long)e->size[l],
                                     (long long)d);
        }
    if (arrow) {
        if (!parse_term(k, arrow + 2, strlen(arrow + 2), -1, e->n_ell, &e->out, NULL)) return k->st->code;
    } else {
        /* Implicit output: ellipsis dims, then labels seen once, in ASCII order. */
        for (int j = 0; j < e->n_ell; j++) e->out.lab[e->out.rank++] = N_LETTERS + j;
        static const char order[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        for (const char *c = order; *c; c++) {
            int l = letter(*c), seen = 0;
            for (int op = 0; op < e->n_ops; op++)
                for (int a = 0; a < e->in[op].rank; a++) seen += e->in[op].lab[a] == l;
            if (seen != 1) continue;
            if (e->out.rank == AMP_MAX_RANK)
                return amp_kernel_fail(k, AMP_ERR_UNSUPPORTED, "output has over %d axes", AMP_MAX_RANK);
            e->out.lab[e->out.rank++] = l;
        }
    }
    bool in_out[N_LABELS] = {false};
    for (int a = 0; a < e->out.rank; a++) {
        int l = e->out.lab[a];
        if (in_out[l]) return amp_kernel_fail(k, AMP_ERR_INPUT, "output label repeated in '%s'", eqs);
        if (e->size[l] < 0) return amp_kernel_fail(k, AMP_ERR_INPUT, "output label not in any input in '%s'", eqs);
        in_out[l] = true;
    }
    for (int l = 0; l < N_LABELS; l++)
        if (e->size[l] >= 0 && !in_out[l]) e->con[e->n_con++] = l;
    return AMP_OK;
}

AmpCode amp_einsum_geom(AmpKernelCtx *k, void *geom, bool *made) {
    (void)made;
    Eq *e = geom;
    AmpCode rc = parse(k, k->attrs, e);
    if (rc) return rc;
    /* The loops run over the label sizes: the placed output must have them. */
    int64_t dims[AMP_MAX_RANK];
    for (int a = 0; a < e->out.rank; a++) dims[a] = e->size[e->out.lab[a]];
    return amp_geom_check(k, 0, k->in[0]->dtype, e->out.rank, dims);
}
