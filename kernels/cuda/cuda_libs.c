/* cuBLASLt and cuDNN through dlopen (cuda_libs.h): each library by its soname first (the
 * loader's search: LD_LIBRARY_PATH, the system's cache), then in the folders the build
 * found it in (AMPC_CUDA_LIBDIRS); NCCL (nccl_comm.c) is looked for the same way. */
#define AMP_CUDA_LIBS_IMPL
#include "kernels/cuda/cuda_libs.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifndef AMPC_CUDA_LIBDIRS
#define AMPC_CUDA_LIBDIRS ""
#endif

#define STR_(x) #x
#define STR(x) STR_(x)

AmpCudaLibs amp_cuda_libs;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static AmpStatus loaded; /* the first load's outcome */

void *amp_cuda_dlopen(const char *soname, char *why, size_t len) {
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    snprintf(why, len, "%s", dlerror());
    for (const char *p = AMPC_CUDA_LIBDIRS; *p;) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char path[1024];
        if (n && n + strlen(soname) + 2 < sizeof path) {
            snprintf(path, sizeof path, "%.*s/%s", (int)n, p, soname);
            if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return h;
        }
        p += n + (end != NULL);
    }
    return NULL;
}

static void load(void) {
    char why[512] = "";
    const char *lt_name = "libcublasLt.so." STR(CUBLAS_VER_MAJOR), *dnn_name = "libcudnn.so." STR(CUDNN_MAJOR);
    void *lt = amp_cuda_dlopen(lt_name, why, sizeof why);
    if (!lt) {
        amp_fail(&loaded, AMP_ERR_UNSUPPORTED, "backend 'cuda': cannot load %s: %s", lt_name, why);
        return;
    }
    void *dnn = amp_cuda_dlopen(dnn_name, why, sizeof why);
    if (!dnn) {
        amp_fail(&loaded, AMP_ERR_UNSUPPORTED, "backend 'cuda': cannot load %s: %s", dnn_name, why);
        return;
    }
    /* The libraries stay loaded for the process's life: sessions come and go. */
#define FIND(lib, f)                                                                                          \
    if (!loaded.code && !(*(void **)&amp_cuda_libs.f = dlsym(lib, #f)))                                     \
        amp_fail(&loaded, AMP_ERR_UNSUPPORTED, "backend 'cuda': %s has no function %s", lib == lt ? lt_name : dnn_name, \
                 #f);
#define FIND_LT(f) FIND(lt, f)
#define FIND_DNN(f) FIND(dnn, f)
    AMP_CUBLASLT_FUNCS(FIND_LT)
    AMP_CUDNN_FUNCS(FIND_DNN)
}

AmpCode amp_cuda_libs_load(AmpStatus *st) {
    pthread_once(&once, load);
    if (!loaded.code) return AMP_OK;
    return amp_fail(st, loaded.code, "%s", loaded.msg);
}
