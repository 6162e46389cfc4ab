/* Stress for csrc/thread_pool.c under ThreadSanitizer and ASan+UBSan (.ci/pool_sanitizers.sh):
 * jobs of many sizes on pools of 2-6 threads, with gaps short enough to be caught by a spin and
 * long enough to put the workers to sleep, each index checked to run exactly once. */
#define _GNU_SOURCE
#include "thread_pool.h"

#include <stdio.h>
#include <unistd.h>

#define MAX_N 512

static void count(void *ctx, int64_t i) {
    __atomic_add_fetch(&((int64_t *)ctx)[i], 1, __ATOMIC_RELAXED);
}

static int run_jobs(int threads, int jobs) {
    pe_pool *pool = pe_pool_create(threads);
    if (pool == NULL) return 2;
    int64_t hits[MAX_N];
    for (int job = 0; job < jobs; job++) {
        int64_t n = 1 + (job * 37) % MAX_N;
        for (int64_t i = 0; i < n; i++) hits[i] = 0;
        pe_pool_run(pool, n, count, hits);
        for (int64_t i = 0; i < n; i++) {
            if (hits[i] != 1) {
                printf("threads %d job %d: index %ld ran %ld times\n", threads, job, (long)i,
                       (long)hits[i]);
                return 1;
            }
        }
        if (job % 97 == 0) usleep(1000); /* past any spin: the sleeping paths */
        else if (job % 5 == 0) usleep(50);
    }
    pe_pool_destroy(pool);
    return 0;
}

int main(void) {
    for (int threads = 2; threads <= 6; threads += 2) {
        int failed = run_jobs(threads, 3000);
        if (failed) return failed;
    }
    printf("ok\n");
    return 0;
}
