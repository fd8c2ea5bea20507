/* What this machine's CPU computes 16-bit floats with (ir.h: amp_cpu_features): read by
 * cpuid, with the operating system's consent to the registers checked (XCR0), so that
 * `--precision auto` decides by what the CPU can run, not by what its model name says. */
#include "ir/ir.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned long long xcr0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

unsigned amp_cpu_features(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0; /* no OSXSAVE: no xgetbv */
    unsigned long long x = xcr0();
    /* AVX-512: opmask, ZMM upper halves and ZMM16-31 (bits 5-7) with SSE and AVX (1, 2). */
    bool avx512_os = (x & 0xe6) == 0xe6;
    /* AMX: XTILECFG and XTILEDATA (bits 17, 18). */
    bool amx_os = (x & 0x60000) == 0x60000;
    unsigned f = 0;
    unsigned a7, b7, c7, d7;
    if (__get_cpuid_count(7, 0, &a7, &b7, &c7, &d7)) {
        if (avx512_os && (d7 & (1u << 23))) f |= AMP_CPU_AVX512_FP16;
        if (amx_os && (d7 & (1u << 22))) f |= AMP_CPU_AMX_BF16;
        unsigned a71, b71, c71, d71;
        if (a7 >= 1 && __get_cpuid_count(7, 1, &a71, &b71, &c71, &d71)) {
            if (avx512_os && (a71 & (1u << 5))) f |= AMP_CPU_AVX512_BF16;
            if (amx_os && (a71 & (1u << 21))) f |= AMP_CPU_AMX_FP16;
        }
    }
    return f;
}
#else
unsigned amp_cpu_features(void) {
    return 0; /* no x86: none of the features named (an ARM CPU's bf16 is not read yet) */
}
#endif

bool amp_cpu_features_parse(const char *s, unsigned *out) {
    static const struct {
        const char *name;
        unsigned bit;
    } NAMES[] = {{"avx512_bf16", AMP_CPU_AVX512_BF16},
                 {"amx_bf16", AMP_CPU_AMX_BF16},
                 {"avx512_fp16", AMP_CPU_AVX512_FP16},
                 {"amx_fp16", AMP_CPU_AMX_FP16}};
    if (!s || !*s) return false;
    if (strcmp(s, "none") == 0) return *out = 0, true;
    unsigned f = 0;
    while (*s) {
        size_t len = strcspn(s, ",");
        size_t i = 0;
        for (; i < sizeof NAMES / sizeof *NAMES; i++)
            if (strlen(NAMES[i].name) == len && strncmp(s, NAMES[i].name, len) == 0) break;
        if (i == sizeof NAMES / sizeof *NAMES) return false;
        f |= NAMES[i].bit;
        s += len;
        if (*s == ',' && !*++s) return false; /* a trailing comma */
    }
    *out = f;
    return true;
}
