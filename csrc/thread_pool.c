/* Persistent pthread pool; see thread_pool.h.
 *
 * A job's hand-off spins briefly before it sleeps: a headless step of 64 bigfish envs is ~50 µs
 * of work, about what a condition-variable wake-up costs, so a pool that always slept made two
 * threads slower than one. Workers spin up to PE_SPIN_NS after their last job (and the caller
 * up to that long for the workers) before falling back to condition variables.
 *
 * Spinning steals the CPU from whoever else needs it: two training processes on 2 cores ran at
 * 409 steps/s each against 6,280 for one alone. So each thread's spin budget follows evidence
 * (adapt_spin): it drops to nothing when the thread was preempted involuntarily since its last
 * wait (getrusage RUSAGE_THREAD: another thread wanted this CPU), halves when the work came
 * later than the budget (the spin was lost), and grows back, doubling from PE_SPIN_MIN_NS up to
 * PE_SPIN_NS, while work keeps arriving within a spin. A spin also yields the CPU
 * (sched_yield) every PE_YIELD_EVERY rounds, so a thread of another process that is waiting
 * for this CPU runs instead of waiting for our time slice to end.
 *
 * Spinning only pays while every thread of a job has a CPU to itself. A job therefore wakes at
 * most (CPUs the process may run on - 1) workers, each on its own condition variable; the
 * others sleep through it. num_threads=16 on 2 CPUs behaves as 2 threads, not as 16 threads
 * spinning for 2 CPUs (which made a step 10x slower than 1 thread, and 2,048 threads 1,700x).
 *
 * Fork: only the forking thread exists in the child, and the pool's lock may be held there by
 * a worker that is gone. An atfork handler bumps a counter in the child; a pool that sees it
 * changed starts new workers on fresh synchronisation objects before its next job, and its
 * destroy frees the memory without joining threads that do not exist. */
#ifdef __linux__
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#else
#define _POSIX_C_SOURCE 200809L
#endif
#include "thread_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define PE_SPIN_NS 300000     /* the longest a thread spins for work (or for the workers) */
#define PE_SPIN_MIN_NS 20000  /* where a budget that found work grows back from */
#define PE_YIELD_EVERY 256    /* spin rounds between sched_yield calls (a power of 2) */
/* The job ticket packs the generation (high bits) and the number of workers that take part
 * (low bits), so that a worker reads both at once. */
#define PE_ACTIVE_BITS 24
#define PE_ACTIVE_MASK ((UINT64_C(1) << PE_ACTIVE_BITS) - 1)
#define PE_MAX_THREADS ((int)PE_ACTIVE_MASK)
/* The claim counter packs the job's generation (its low bits, as a tag) above the next index,
 * so that a worker that woke late cannot claim indexes of a later job. */
#define PE_INDEX_BITS 40
#define PE_INDEX_MASK ((UINT64_C(1) << PE_INDEX_BITS) - 1)

/* A thread's spin budget, set by what its recent waits found (adapt_spin). */
typedef struct {
    int64_t budget_ns;
    long preempted;            /* the thread's involuntary context switches at its last wait */
} spin_state;

typedef struct {
    pe_pool *pool;
    int index;                 /* workers 0 .. active-1 take part in a job */
    int sleeping;              /* waiting on wake (under the pool's lock) */
    uint64_t first_seen;       /* the generation before the worker's first job */
    spin_state spin;
    pthread_cond_t wake;
} worker_slot;

struct pe_pool {
    int num_threads;           /* including the caller */
    int cpus;                  /* CPUs the process could run on when the workers started */
    pthread_t *workers;
    worker_slot *slots;
    int started;               /* workers successfully created */
    unsigned fork_epoch;       /* pe_fork_epoch when they were */
    pthread_mutex_t lock;
    pthread_cond_t work_done;
    uint64_t ticket;           /* atomic: generation << PE_ACTIVE_BITS | active workers */
    int stopping;              /* atomic */
    int caller_waiting;        /* the caller sleeps on work_done (under lock) */
    spin_state caller_spin;    /* callers serialise pe_pool_run: one state for them */
    uint64_t next;             /* atomic: job tag | first index not yet claimed */
    int64_t done;              /* atomic: indexes of the current job finished */
    int64_t chunk;             /* atomic: indexes claimed at a time */
    int64_t n;                 /* atomic: the job's size; n, chunk, fn and ctx are published */
    pe_task_fn fn;             /* before the ticket */
    void *ctx;
};

/* Bumped in the child of every fork (atomic). */
static unsigned pe_fork_epoch;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void) { __atomic_add_fetch(&pe_fork_epoch, 1, __ATOMIC_RELAXED); }

static void register_atfork(void) { pthread_atfork(NULL, NULL, on_fork_child); }

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* The calling thread's involuntary context switches so far (0 where unknown). */
static long preemptions(void) {
#if defined(__linux__) && defined(RUSAGE_THREAD)
    struct rusage usage;
    if (getrusage(RUSAGE_THREAD, &usage) == 0) return usage.ru_nivcsw;
#endif
    return 0;
}

/* After a wait of `waited_ns` (from running out of work to the next work): the budget of the
 * next spin. A preemption since the last wait (while working or waiting) means the CPUs are
 * oversubscribed: no spin until waits are short again without one. */
static void adapt_spin(spin_state *spin, int64_t waited_ns) {
    long preempted = preemptions();
    int contended = preempted != spin->preempted;
    spin->preempted = preempted;
    if (contended) {
        spin->budget_ns = 0;
    } else if (waited_ns <= PE_SPIN_NS) {  /* a spin would have found it */
        int64_t grown = spin->budget_ns < PE_SPIN_MIN_NS ? PE_SPIN_MIN_NS : 2 * spin->budget_ns;
        spin->budget_ns = grown < PE_SPIN_NS ? grown : PE_SPIN_NS;
    } else {
        spin->budget_ns /= 2;  /* the work came after the budget: the spin was lost */
    }
}

/* Every PE_YIELD_EVERY rounds of a spin: give the CPU to a thread waiting for it. */
static inline void spin_round(int k) {
    cpu_relax();
    if ((k & (PE_YIELD_EVERY - 1)) == PE_YIELD_EVERY - 1) sched_yield();
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The CPUs this process may run on (its affinity mask), not the machine's count. */
static int usable_cpus(void) {
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}

static inline uint64_t generation_of(uint64_t ticket) { return ticket >> PE_ACTIVE_BITS; }

static inline uint64_t job_tag(uint64_t generation) { return generation << PE_INDEX_BITS; }

/* Claim chunks of job `generation` until none are left, or until the counter belongs to
 * another job (a worker that woke after its job was finished). Per-index costs vary a lot (an
 * env that resets its level costs 10-100x a plain step), so fixed blocks per thread leave
 * threads idle. Finished indexes are counted, so the caller waits only for claimed chunks,
 * never for a worker that has not run yet (on a busy machine that wait was most of a step). */
static void run_chunks(pe_pool *pool, uint64_t generation, int is_caller) {
    uint64_t tag = job_tag(generation);
    for (;;) {
        uint64_t word = __atomic_load_n(&pool->next, __ATOMIC_SEQ_CST);
        int64_t begin, end, n;
        do {
            if ((word & ~PE_INDEX_MASK) != tag) return;
            begin = (int64_t)(word & PE_INDEX_MASK);
            /* Stale if the job changed meanwhile, but then the claim below fails: the caller
             * resets the counter before it writes n and chunk. */
            n = __atomic_load_n(&pool->n, __ATOMIC_SEQ_CST);
            int64_t chunk = __atomic_load_n(&pool->chunk, __ATOMIC_SEQ_CST);
            if (begin >= n) return;
            end = begin + chunk < n ? begin + chunk : n;
        } while (!__atomic_compare_exchange_n(&pool->next, &word, tag | (uint64_t)end, 0,
                                              __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
        /* The job stays current until this chunk is counted: fn and ctx are its own. */
        pe_task_fn fn = pool->fn;
        void *ctx = pool->ctx;
        for (int64_t i = begin; i < end; i++) fn(ctx, i);
        if (__atomic_add_fetch(&pool->done, end - begin, __ATOMIC_ACQ_REL) == n && !is_caller) {
            pthread_mutex_lock(&pool->lock);
            if (pool->caller_waiting) pthread_cond_signal(&pool->work_done);
            pthread_mutex_unlock(&pool->lock);
        }
    }
}

/* The caller, out of chunks: spin (its budget) until the workers have finished, else sleep
 * on work_done. */
static void wait_until_done(pe_pool *pool, int64_t n) {
    int64_t start = now_ns(), deadline = start + pool->caller_spin.budget_ns;
    for (int k = 0; __atomic_load_n(&pool->done, __ATOMIC_ACQUIRE) < n; k++) {
        if ((k & 63) == 63 && now_ns() > deadline) {
            pthread_mutex_lock(&pool->lock);
            while (__atomic_load_n(&pool->done, __ATOMIC_ACQUIRE) < n) {
                pool->caller_waiting = 1;
                pthread_cond_wait(&pool->work_done, &pool->lock);
            }
            pool->caller_waiting = 0;
            pthread_mutex_unlock(&pool->lock);
            break;
        }
        spin_round(k);
    }
    adapt_spin(&pool->caller_spin, now_ns() - start);
}

/* The next ticket whose generation is not `seen` (or any once stopping): spin until
 * `spin_until`, then sleep on this worker's own condition variable. */
static uint64_t wait_for_job(worker_slot *slot, uint64_t seen, int64_t spin_until) {
    pe_pool *pool = slot->pool;
    uint64_t ticket;
    for (int k = 0;; k++) {
        ticket = __atomic_load_n(&pool->ticket, __ATOMIC_ACQUIRE);
        if (generation_of(ticket) != seen || __atomic_load_n(&pool->stopping, __ATOMIC_ACQUIRE))
            return ticket;
        if ((k & 63) == 63 && now_ns() > spin_until) break;
        spin_round(k);
    }
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        ticket = __atomic_load_n(&pool->ticket, __ATOMIC_ACQUIRE);
        if (generation_of(ticket) != seen || __atomic_load_n(&pool->stopping, __ATOMIC_ACQUIRE))
            break;
        slot->sleeping = 1;
        pthread_cond_wait(&slot->wake, &pool->lock);
        slot->sleeping = 0;
    }
    pthread_mutex_unlock(&pool->lock);
    return ticket;
}

static void *worker_main(void *raw) {
    worker_slot *slot = (worker_slot *)raw;
    pe_pool *pool = slot->pool;
    uint64_t seen = slot->first_seen;  /* not read here: a job may be out before we run */
    int64_t idle_since = 0;  /* a new worker sleeps until its first job */
    slot->spin.preempted = preemptions();
    for (;;) {
        int64_t spin_until = idle_since == 0 ? 0 : idle_since + slot->spin.budget_ns;
        uint64_t ticket = wait_for_job(slot, seen, spin_until);
        if (__atomic_load_n(&pool->stopping, __ATOMIC_ACQUIRE)) break;
        seen = generation_of(ticket);
        if ((uint64_t)slot->index >= (ticket & PE_ACTIVE_MASK)) continue;  /* not in this job */
        if (idle_since != 0) adapt_spin(&slot->spin, now_ns() - idle_since);
        run_chunks(pool, seen, 0);
        idle_since = now_ns();
    }
    return NULL;
}

/* Fresh synchronisation objects and workers (at creation, and in a forked child). Returns
 * the number of workers started. */
static int start_workers(pe_pool *pool) {
    pool->fork_epoch = __atomic_load_n(&pe_fork_epoch, __ATOMIC_RELAXED);
    pool->cpus = usable_cpus();
    pool->started = 0;
    __atomic_store_n(&pool->stopping, 0, __ATOMIC_RELAXED);
    pool->caller_waiting = 0;
    pool->caller_spin.budget_ns = PE_SPIN_NS;
    pool->caller_spin.preempted = preemptions();
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->work_done, NULL);
    for (int k = 0; k < pool->num_threads - 1; k++) {
        worker_slot *slot = &pool->slots[k];
        slot->pool = pool;
        slot->index = k;
        slot->sleeping = 0;
        slot->first_seen = generation_of(pool->ticket);
        slot->spin.budget_ns = PE_SPIN_NS;
        pthread_cond_init(&slot->wake, NULL);
    }
    for (int k = 0; k < pool->num_threads - 1; k++) {
        if (pthread_create(&pool->workers[k], NULL, worker_main, &pool->slots[k]) != 0) break;
        pool->started++;
    }
    return pool->started;
}

static int forked_since_start(const pe_pool *pool) {
    return pool->fork_epoch != __atomic_load_n(&pe_fork_epoch, __ATOMIC_RELAXED);
}

pe_pool *pe_pool_create(int num_threads) {
    if (num_threads < 1 || num_threads > PE_MAX_THREADS) return NULL;
    pthread_once(&atfork_once, register_atfork);
    pe_pool *pool = (pe_pool *)calloc(1, sizeof(pe_pool));
    if (pool == NULL) return NULL;
    pool->num_threads = num_threads;
    pool->workers = (pthread_t *)calloc((size_t)num_threads, sizeof(pthread_t));
    pool->slots = (worker_slot *)calloc((size_t)num_threads, sizeof(worker_slot));
    if (pool->workers == NULL || pool->slots == NULL) {
        free(pool->workers);
        free(pool->slots);
        free(pool);
        return NULL;
    }
    if (start_workers(pool) != num_threads - 1) {
        pe_pool_destroy(pool);
        return NULL;
    }
    return pool;
}

int pe_pool_threads(const pe_pool *pool) { return pool->num_threads; }

/* Threads (the caller included) that take part in a job of n indexes: no more than the CPUs,
 * the workers alive, or the chunks there are; and the job's chunk size. */
static int64_t job_threads(const pe_pool *pool, int64_t n, int64_t *chunk) {
    int64_t threads = pool->num_threads;
    if (threads > pool->cpus) threads = pool->cpus;
    if (threads > pool->started + 1) threads = pool->started + 1;
    if (threads > n) threads = n;
    if (threads < 1) threads = 1;
    *chunk = n / (4 * threads) > 0 ? n / (4 * threads) : 1;
    int64_t chunks = (n + *chunk - 1) / *chunk;
    return threads < chunks ? threads : chunks;
}

void pe_pool_run(pe_pool *pool, int64_t n, pe_task_fn fn, void *ctx) {
    if (n <= 0) return;
    if (pool != NULL && pool->num_threads > 1 && forked_since_start(pool)) start_workers(pool);
    int64_t chunk = 1, threads = 1;
    if (pool != NULL && pool->num_threads > 1 && n > 1 && (uint64_t)n <= PE_INDEX_MASK)
        threads = job_threads(pool, n, &chunk);
    if (threads == 1) {
        for (int64_t i = 0; i < n; i++) fn(ctx, i);
        return;
    }
    int active = (int)(threads - 1);
    uint64_t generation = generation_of(__atomic_load_n(&pool->ticket, __ATOMIC_ACQUIRE)) + 1;
    /* This order is what run_chunks relies on: the counter first, then n and chunk. */
    __atomic_store_n(&pool->done, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&pool->next, job_tag(generation), __ATOMIC_SEQ_CST);
    __atomic_store_n(&pool->n, n, __ATOMIC_SEQ_CST);
    __atomic_store_n(&pool->chunk, chunk, __ATOMIC_SEQ_CST);
    pool->fn = fn;
    pool->ctx = ctx;
    __atomic_store_n(&pool->ticket, generation << PE_ACTIVE_BITS | (uint64_t)active,
                     __ATOMIC_RELEASE);
    /* A worker checks the ticket under the lock before it sleeps, so one that is not marked
     * sleeping here has seen the new ticket. */
    pthread_mutex_lock(&pool->lock);
    for (int k = 0; k < active; k++)
        if (pool->slots[k].sleeping) pthread_cond_signal(&pool->slots[k].wake);
    pthread_mutex_unlock(&pool->lock);

    run_chunks(pool, generation, 1);
    wait_until_done(pool, n);
}

void pe_pool_destroy(pe_pool *pool) {
    if (pool == NULL) return;
    /* In a forked child the workers are gone and their lock may be held: just free. */
    if (!forked_since_start(pool)) {
        pthread_mutex_lock(&pool->lock);
        __atomic_store_n(&pool->stopping, 1, __ATOMIC_RELEASE);
        for (int k = 0; k < pool->started; k++) pthread_cond_signal(&pool->slots[k].wake);
        pthread_mutex_unlock(&pool->lock);
        for (int k = 0; k < pool->started; k++) pthread_join(pool->workers[k], NULL);
        for (int k = 0; k < pool->num_threads - 1; k++) pthread_cond_destroy(&pool->slots[k].wake);
        pthread_cond_destroy(&pool->work_done);
        pthread_mutex_destroy(&pool->lock);
    }
    free(pool->workers);
    free(pool->slots);
    free(pool);
}
