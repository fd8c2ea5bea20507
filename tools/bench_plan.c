/* The memory planner's time on a chain of N buffers (each live from its producer to one or
 * two steps later, sizes 4096 to 4480 bytes), the shape of a long inference graph: a
 * benchmark, not a test (tests/runtime/test_plan.c checks the plans). Before the segment
 * tree, planning was quadratic (80,000 buffers: 8.0 s; 200,000: about 40 s).
 *
 * usage: build/bench_plan [N]   (default 1000000)
 *   e.g. build/bench_plan 1000000 -> "1000000 buffers: arena 17472 bytes, 1.08 s" */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "runtime/plan.h"

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000;
    if (!n || n > 100000000) {
        fprintf(stderr, "usage: bench_plan [N], N from 1 to 100000000\n");
        return 2;
    }
    AmpPlanItem *it = malloc(n * sizeof *it);
    if (!it) return 1;
    for (size_t i = 0; i < n; i++) it[i] = (AmpPlanItem){4096 + (i % 7) * 64, (int)i, (int)(i + 1 + i % 3), 0};
    struct timespec a, b;
    size_t arena = 0;
    AmpStatus st = {0};
    clock_gettime(CLOCK_MONOTONIC, &a);
    AmpCode rc = amp_plan_offsets(it, n, 64, &arena, &st);
    clock_gettime(CLOCK_MONOTONIC, &b);
    free(it);
    if (rc) {
        fprintf(stderr, "bench_plan: %s\n", st.msg);
        return 1;
    }
    printf("%zu buffers: arena %zu bytes, %.2f s\n", n, arena,
           (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
    return 0;
}
