/* cuBLASLt and cuDNN are opened with dlopen (kernels/cuda/cuda_libs.c), not linked: ampc
 * must not load them at start. The load finds every function the backend calls, answers
 * the same on a second call, and the pointers are the libraries' (their status strings,
 * which need no GPU). Skips where the libraries are not installed. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <string.h>

#include "kernels/cuda/cuda_libs.h"

Test(cuda_libs, every_function_is_found_and_callable) {
    AmpStatus st = {0};
    AmpCode rc = amp_cuda_libs_load(&st);
    if (rc) cr_skip_test("cuBLASLt / cuDNN not loadable here: %s", st.msg);
    cr_assert_eq(amp_cuda_libs_load(&st), AMP_OK, "a second load answers as the first");
    const void *const *fn = (const void *const *)&amp_cuda_libs;
    for (size_t i = 0; i < sizeof amp_cuda_libs / sizeof(void *); i++) cr_assert_not_null(fn[i], "function %zu", i);
    cr_assert_str_eq(cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED), "CUDNN_STATUS_NOT_SUPPORTED");
    cr_assert_str_eq(cublasLtGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED), "the requested functionality is not supported");
}

/* Not linked: before the load, the process had neither library (ampc's start stays cheap). */
Test(cuda_libs, the_libraries_are_not_linked) {
    void *lt = dlopen("libcublasLt.so.13", RTLD_NOLOAD | RTLD_LAZY), *dnn = dlopen("libcudnn.so.9", RTLD_NOLOAD | RTLD_LAZY);
    cr_assert_null(lt, "libcublasLt is loaded before any CUDA backend opened");
    cr_assert_null(dnn, "libcudnn is loaded before any CUDA backend opened");
}
