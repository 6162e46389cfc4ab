/* Persistent pthread pool; see thread_pool.h.
 *
 * A job's hand-off spins briefly before it sleeps: a headless step of 64 bigfish envs is ~50 µs
 * of work, about what a condition-variable wake-up costs, so a pool that always slept made two
 * threads slower than one. Workers spin up to PE_SPIN_NS after their last job (and the caller
 * up to that long for the workers) before falling back to the condition variables. */
#define _POSIX_C_SOURCE 200809L
#include "thread_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define PE_SPIN_NS 300000

struct pe_pool {
    int num_threads;           /* including the caller */
    pthread_t *workers;
    int started;               /* workers successfully created */
    pthread_mutex_t lock;
    pthread_cond_t work_ready;
    pthread_cond_t work_done;
    uint64_t generation;       /* atomic: bumped for each job; workers run each generation once */
    int pending;               /* atomic: workers still running the current job */
    int stopping;              /* atomic */
    int sleepers;              /* workers waiting on work_ready (under lock) */
    int64_t next;              /* atomic: first index not yet claimed */
    int64_t chunk;             /* indexes claimed at a time */
    int64_t n;                 /* the job, published before generation is bumped */
    pe_task_fn fn;
    void *ctx;
};


static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spin until *value != unwanted (returns 1) or the spin budget is spent (0). */
static int spin_while_u64(const uint64_t *value, uint64_t unwanted, const int *stopping) {
    int64_t deadline = now_ns() + PE_SPIN_NS;
    for (int k = 0;; k++) {
        if (__atomic_load_n(value, __ATOMIC_ACQUIRE) != unwanted) return 1;
        if (__atomic_load_n(stopping, __ATOMIC_ACQUIRE)) return 1;
        cpu_relax();
        if ((k & 63) == 63 && now_ns() > deadline) return 0;
    }
}

static int spin_while_positive(const int *value) {
    int64_t deadline = now_ns() + PE_SPIN_NS;
    for (int k = 0;; k++) {
        if (__atomic_load_n(value, __ATOMIC_ACQUIRE) <= 0) return 1;
        cpu_relax();
        if ((k & 63) == 63 && now_ns() > deadline) return 0;
    }
}

/* Claim chunks until none are left: per-index costs vary a lot (an env that resets its level
 * costs 10-100x a plain step), so fixed blocks per thread leave threads idle. */
static void run_chunks(pe_pool *pool, int64_t n, pe_task_fn fn, void *ctx) {
    for (;;) {
        int64_t begin = __atomic_fetch_add(&pool->next, pool->chunk, __ATOMIC_ACQ_REL);
        if (begin >= n) return;
        int64_t end = begin + pool->chunk < n ? begin + pool->chunk : n;
        for (int64_t i = begin; i < end; i++) fn(ctx, i);
    }
}

static void *worker_main(void *raw) {
    pe_pool *pool = (pe_pool *)raw;
    uint64_t seen = 0;
    for (;;) {
        if (!spin_while_u64(&pool->generation, seen, &pool->stopping)) {
            pthread_mutex_lock(&pool->lock);
            while (!__atomic_load_n(&pool->stopping, __ATOMIC_ACQUIRE) &&
                   __atomic_load_n(&pool->generation, __ATOMIC_ACQUIRE) == seen) {
                pool->sleepers++;
                pthread_cond_wait(&pool->work_ready, &pool->lock);
                pool->sleepers--;
            }
            pthread_mutex_unlock(&pool->lock);
        }
        if (__atomic_load_n(&pool->stopping, __ATOMIC_ACQUIRE)) break;
        seen = __atomic_load_n(&pool->generation, __ATOMIC_ACQUIRE);
        run_chunks(pool, pool->n, pool->fn, pool->ctx);
        if (__atomic_sub_fetch(&pool->pending, 1, __ATOMIC_ACQ_REL) == 0) {
            pthread_mutex_lock(&pool->lock);
            pthread_cond_signal(&pool->work_done);
            pthread_mutex_unlock(&pool->lock);
        }
    }
    return NULL;
}

pe_pool *pe_pool_create(int num_threads) {
    if (num_threads < 1) return NULL;
    pe_pool *pool = (pe_pool *)calloc(1, sizeof(pe_pool));
    if (pool == NULL) return NULL;
    pool->num_threads = num_threads;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->work_ready, NULL);
    pthread_cond_init(&pool->work_done, NULL);
    pool->workers = (pthread_t *)calloc((size_t)num_threads, sizeof(pthread_t));
    if (pool->workers == NULL) {
        pe_pool_destroy(pool);
        return NULL;
    }
    for (int k = 1; k < num_threads; k++) {
        if (pthread_create(&pool->workers[k - 1], NULL, worker_main, pool) != 0) break;
        pool->started++;
    }
    if (pool->started != num_threads - 1) {
        pe_pool_destroy(pool);
        return NULL;
    }
    return pool;
}

int pe_pool_threads(const pe_pool *pool) { return pool->num_threads; }

void pe_pool_run(pe_pool *pool, int64_t n, pe_task_fn fn, void *ctx) {
    if (n <= 0) return;
    if (pool == NULL || pool->num_threads == 1 || n == 1) {
        for (int64_t i = 0; i < n; i++) fn(ctx, i);
        return;
    }
    pool->n = n;
    pool->chunk = n / (4 * (int64_t)pool->num_threads) > 0 ? n / (4 * (int64_t)pool->num_threads) : 1;
    __atomic_store_n(&pool->next, 0, __ATOMIC_RELEASE);
    pool->fn = fn;
    pool->ctx = ctx;
    __atomic_store_n(&pool->pending, pool->num_threads - 1, __ATOMIC_RELEASE);
    __atomic_add_fetch(&pool->generation, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_lock(&pool->lock);
    if (pool->sleepers > 0) pthread_cond_broadcast(&pool->work_ready);
    pthread_mutex_unlock(&pool->lock);

    run_chunks(pool, n, fn, ctx);

    if (!spin_while_positive(&pool->pending)) {
        pthread_mutex_lock(&pool->lock);
        while (__atomic_load_n(&pool->pending, __ATOMIC_ACQUIRE) > 0)
            pthread_cond_wait(&pool->work_done, &pool->lock);
        pthread_mutex_unlock(&pool->lock);
    }
}

void pe_pool_destroy(pe_pool *pool) {
    if (pool == NULL) return;
    pthread_mutex_lock(&pool->lock);
    __atomic_store_n(&pool->stopping, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&pool->work_ready);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < pool->started; i++) pthread_join(pool->workers[i], NULL);
    pthread_cond_destroy(&pool->work_ready);
    pthread_cond_destroy(&pool->work_done);
    pthread_mutex_destroy(&pool->lock);
    free(pool->workers);
    free(pool);
}
