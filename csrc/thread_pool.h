/* A persistent pool of pthreads that runs one data-parallel job at a time.
 *
 * pe_pool_run(pool, n, fn, ctx) calls fn(ctx, i) for every i in [0, n), in chunks that the
 * workers and the calling thread claim in turn, and returns when all calls have finished.
 * The caller must not hold locks that fn needs; fn must be thread-safe for different i.
 * A NULL pool runs every call on the calling thread. One job at a time: callers serialise
 * pe_pool_run and pe_pool_destroy themselves.
 *
 * A job uses at most as many threads as the CPUs the process may run on (its affinity when the
 * workers started): the other workers sleep through it. After fork() the child's pool starts
 * new workers at its next job, and destroying it there frees it without joining the parent's.
 */
#ifndef PE_THREAD_POOL_H
#define PE_THREAD_POOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pe_pool pe_pool;
typedef void (*pe_task_fn)(void *ctx, int64_t i);

/* 1 <= num_threads < 2**24 counts the caller: num_threads - 1 workers are started. NULL on
 * failure. */
pe_pool *pe_pool_create(int num_threads);
int pe_pool_threads(const pe_pool *pool);
void pe_pool_run(pe_pool *pool, int64_t n, pe_task_fn fn, void *ctx);
/* Joins the workers and frees the pool; NULL is accepted. */
void pe_pool_destroy(pe_pool *pool);

#ifdef __cplusplus
}
#endif
#endif
