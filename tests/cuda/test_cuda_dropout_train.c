/* Dropout in training steps on the device against the CPU, step by step: a model
 * X -> Dropout (no training_mode: the executor's training step decides) -> Y, mask, and
 * com.microsoft DropoutGrad(Y, mask) -> dX, trained four steps from the same seed by a CPU
 * session and by a device session without fallback (CUDA where a device is usable, else
 * the device simulator, so the harness runs everywhere). The counter-based mask
 * (ops/dropout_rng.h) makes Y, mask and dX equal bit for bit on both, every step,
 * while the masks change from step to step; inference afterwards keeps everything. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ir/half.h"
#include "kernels/cuda/convert.h"
#include "tests/runtime/rt_util.h"

enum { ROWS = 37, COLS = 129, N = ROWS * COLS, STEPS = 4 };

static uint8_t *model_bytes(int dt, size_t *len) {
    AmpModel *m = rt_model(13);
    m->opsets[m->n_opsets++] = (AmpOpset){amp_arena_strdup(&m->arena, "com.microsoft"), 1, true};
    AmpGraph *g = m->graph;
    rt_input(g, "X", dt, "37,129");
    rt_node(g, "", "Dropout", "X", "Y,mask");
    rt_node(g, "com.microsoft", "DropoutGrad", "Y,mask", "dX");
    rt_output(g, "Y", dt, "37,129");
    rt_output(g, "mask", AMP_DT_BOOL, "37,129");
    rt_output(g, "dX", dt, "37,129");
    uint8_t *bytes = NULL;
    AmpStatus st = {0};
    cr_assert_eq(amp_model_save_bytes(m, &bytes, len, &st), AMP_OK, "save: %s", st.msg);
    amp_model_free(m);
    return bytes;
}

static AmpSession *open_on(AmpBackendKind be, const uint8_t *bytes, size_t len) {
    AmpSessionOptions o = {.backend = be, .ignore_env = true, .seed = 7, .no_fallback = be != AMP_BACKEND_CPU};
    AmpSession *s = NULL;
    AmpStatus st = {0};
    cr_assert_eq(amp_session_open_bytes(bytes, len, NULL, &o, &s, &st), AMP_OK, "open: %s", st.msg);
    return s;
}

static size_t esize(int dt) {
    return dt == AMP_DT_FLOAT ? 4 : 2;
}

Test(cuda_dropout_train, device_masks_equal_the_cpus_every_step) {
    AmpBackendKind dev = amp_cuda_device_available() ? AMP_BACKEND_CUDA : AMP_BACKEND_SIM;
    const int dts[3] = {AMP_DT_FLOAT, AMP_DT_FLOAT16, AMP_DT_BFLOAT16};
    for (int di = 0; di < 3; di++) {
        int dt = dts[di];
        size_t len = 0, es = esize(dt);
        uint8_t *bytes = model_bytes(dt, &len);
        AmpSession *cpu = open_on(AMP_BACKEND_CPU, bytes, len), *gpu = open_on(dev, bytes, len);
        uint8_t *x = malloc(N * es), *prev = calloc(N, 1);
        for (int i = 0; i < N; i++) {
            float v = (float)((i * 37) % 101) / 16.0f - 3.0f;
            if (dt == AMP_DT_FLOAT) ((float *)x)[i] = v;
            else ((uint16_t *)x)[i] = dt == AMP_DT_FLOAT16 ? amp_f32_to_f16(v) : amp_f32_to_bf16(v);
        }
        const int64_t dims[2] = {ROWS, COLS};
        AmpTensorView in = rt_view("X", dt, x, 2, dims);
        AmpStatus st = {0};
        for (int step = 0; step <= STEPS; step++) {
            AmpTensorView a[3] = {0}, b[3] = {0};
            bool train = step < STEPS; /* the last call is inference */
            AmpCode ra = train ? amp_session_train_step(cpu, &in, 1, NULL, 3, a, &st)
                               : amp_session_run(cpu, &in, 1, NULL, 3, a, &st);
            cr_assert_eq(ra, AMP_OK, "CPU step %d: %s", step, st.msg);
            AmpCode rb = train ? amp_session_train_step(gpu, &in, 1, NULL, 3, b, &st)
                               : amp_session_run(gpu, &in, 1, NULL, 3, b, &st);
            cr_assert_eq(rb, AMP_OK, "device step %d (dtype %d): %s", step, dt, st.msg);
            cr_assert_eq(memcmp(a[0].data, b[0].data, N * es), 0, "Y differs at step %d (dtype %d)", step, dt);
            cr_assert_eq(memcmp(a[1].data, b[1].data, N), 0, "the mask differs at step %d (dtype %d)", step, dt);
            cr_assert_eq(memcmp(a[2].data, b[2].data, N * es), 0, "dX differs at step %d (dtype %d)", step, dt);
            const uint8_t *mask = a[1].data;
            int kept = 0;
            for (int i = 0; i < N; i++) kept += mask[i] != 0;
            if (train) {
                cr_assert(kept > N * 0.45 && kept < N * 0.55, "step %d kept %d of %d", step, kept, N);
                cr_assert_neq(memcmp(prev, mask, N), 0, "step %d has the previous step's mask", step);
                memcpy(prev, mask, N);
            } else {
                cr_assert_eq(kept, N, "inference keeps everything");
            }
            for (int o = 0; o < 3; o++) amp_tensor_view_free(&a[o]), amp_tensor_view_free(&b[o]);
        }
        amp_session_close(cpu);
        amp_session_close(gpu);
        free(x), free(prev), free(bytes);
    }
}
