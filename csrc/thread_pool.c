/* Persistent pthread pool; see thread_pool.h. */
#define _POSIX_C_SOURCE 200809L
#include "thread_pool.h"

#include <pthread.h>
#include <stdlib.h>

struct pe_pool {
    int num_threads;           /* including the caller */
    pthread_t *workers;
    int started;               /* workers successfully created */
    pthread_mutex_t lock;
    pthread_cond_t work_ready;
    pthread_cond_t work_done;
    uint64_t generation;       /* bumped for each job; workers run each generation once */
    int pending;               /* workers still running the current job */
    int stopping;
    int64_t n;
    pe_task_fn fn;
    void *ctx;
};

typedef struct {
    pe_pool *pool;
    int rank;                  /* 1..num_threads-1; the caller is rank 0 */
} worker_arg;

static void run_block(pe_pool *pool, int rank, int64_t n, pe_task_fn fn, void *ctx) {
    int64_t begin = n * rank / pool->num_threads;
    int64_t end = n * (rank + 1) / pool->num_threads;
    for (int64_t i = begin; i < end; i++) fn(ctx, i);
}

static void *worker_main(void *raw) {
    worker_arg *arg = (worker_arg *)raw;
    pe_pool *pool = arg->pool;
    int rank = arg->rank;
    uint64_t seen = 0;
    free(arg);
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (!pool->stopping && pool->generation == seen)
            pthread_cond_wait(&pool->work_ready, &pool->lock);
        if (pool->stopping) break;
        seen = pool->generation;
        int64_t n = pool->n;
        pe_task_fn fn = pool->fn;
        void *ctx = pool->ctx;
        pthread_mutex_unlock(&pool->lock);
        run_block(pool, rank, n, fn, ctx);
        pthread_mutex_lock(&pool->lock);
        if (--pool->pending == 0) pthread_cond_signal(&pool->work_done);
    }
    pthread_mutex_unlock(&pool->lock);
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
    for (int rank = 1; rank < num_threads; rank++) {
        worker_arg *arg = (worker_arg *)malloc(sizeof(worker_arg));
        if (arg == NULL) break;
        arg->pool = pool;
        arg->rank = rank;
        if (pthread_create(&pool->workers[rank - 1], NULL, worker_main, arg) != 0) {
            free(arg);
            break;
        }
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
    pthread_mutex_lock(&pool->lock);
    pool->n = n;
    pool->fn = fn;
    pool->ctx = ctx;
    pool->pending = pool->num_threads - 1;
    pool->generation++;
    pthread_cond_broadcast(&pool->work_ready);
    pthread_mutex_unlock(&pool->lock);

    run_block(pool, 0, n, fn, ctx);

    pthread_mutex_lock(&pool->lock);
    while (pool->pending > 0) pthread_cond_wait(&pool->work_done, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
}

void pe_pool_destroy(pe_pool *pool) {
    if (pool == NULL) return;
    pthread_mutex_lock(&pool->lock);
    pool->stopping = 1;
    pthread_cond_broadcast(&pool->work_ready);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < pool->started; i++) pthread_join(pool->workers[i], NULL);
    pthread_cond_destroy(&pool->work_ready);
    pthread_cond_destroy(&pool->work_done);
    pthread_mutex_destroy(&pool->lock);
    free(pool->workers);
    free(pool);
}
