/* A persistent pool of pthreads that runs one data-parallel job at a time.
 *
 * pe_pool_run(pool, n, fn, ctx) calls fn(ctx, i) for every i in [0, n), in chunks that the
 * workers and the calling thread claim in turn, and returns when all calls have finished.
 * The caller must not hold locks that fn needs; fn must be thread-safe for different i.
 * A NULL pool runs every call on the calling thread.
 */
#ifndef PE_THREAD_POOL_H
#define PE_THREAD_POOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pe_pool pe_pool;
typedef void (*pe_task_fn)(void *ctx, int64_t i);

/* num_threads >= 1 counts the caller: num_threads - 1 workers are started. NULL on failure. */
pe_pool *pe_pool_create(int num_threads);
int pe_pool_threads(const pe_pool *pool);
void pe_pool_run(pe_pool *pool, int64_t n, pe_task_fn fn, void *ctx);
/* Joins the workers and frees the pool; NULL is accepted. */
void pe_pool_destroy(pe_pool *pool);

#ifdef __cplusplus
}
#endif
#endif
