/* procgen's live games, read and stepped; see live_game.h. */
#include "live_game.h"

#include <string.h>

#include "le_read.h"
#include "live_read.h"

#define PE_TERMINATOR_VALUE ((int32_t)0xCAFECAFEu)

/* ---- writing a state ---- */

typedef struct {
    uint8_t *at;
    uint8_t *end;
    pe_status failed;  /* PE_OK while writing; the first failure's status, then nothing is written */
} out_cursor;

static inline uint8_t *reserve(out_cursor *c, int64_t bytes) {
    if (c->failed || bytes < 0 || bytes > c->end - c->at) {
        if (!c->failed) c->failed = PE_ERR_SPACE;
        return NULL;
    }
    uint8_t *p = c->at;
    c->at += bytes;
    return p;
}
static inline void put_i32(out_cursor *c, int32_t v) {
    uint8_t *p = reserve(c, 4);
    if (p) write_i32_at(p, v);
}

static void put_members(out_cursor *c, const int32_t *program, int32_t n_ops, const uint8_t *obj) {
    uint8_t *p = reserve(c, 4 * (int64_t)n_ops);
    if (p == NULL) return;
    for (int32_t k = 0; k < n_ops; k++, p += 4) {
        int32_t op = program[2 * k], arg = program[2 * k + 1];
        if (op == PE_OP_B1) write_i32_at(p, obj[arg] != 0);
        else memcpy(p, obj + arg, 4);
    }
}

/* The entity vector at vec: BasicAbstractGame::entities (agent_member: the game's
 * BasicAbstractGame::agent, put back first where procgen erased it, see live_game.h) or a
 * trailer's (starpilot's spawners; agent_member NULL). */
static void put_entities(out_cursor *c, const pe_live_spec *spec, const uint8_t *vec,
                         const uint8_t *agent_member) {
    const uint8_t *items;
    int64_t n = vector_span(vec, 16, &items);  /* shared_ptr<Entity>: {Entity *, control *} */
    if (n < 0) {
        c->failed = PE_ERR_LAYOUT;
        return;
    }
    const uint8_t *erased = agent_member ? erased_agent(agent_member, vec) : NULL;
    put_i32(c, (int32_t)(n + (erased != NULL)));
    if (erased != NULL) put_members(c, spec->entity_program, spec->n_entity_program, erased);
    for (int64_t k = 0; k < n && !c->failed; k++) {
        const uint8_t *entity = read_ptr(items + 16 * k);
        if (entity == NULL || !aligned(entity, 4)) {
            c->failed = PE_ERR_LAYOUT;
            return;
        }
        put_members(c, spec->entity_program, spec->n_entity_program, entity);
    }
}

static void put_vec4(out_cursor *c, const uint8_t *vec) {
    const uint8_t *items;
    int64_t n = vector_span(vec, 4, &items);
    if (n < 0) {
        c->failed = PE_ERR_LAYOUT;
        return;
    }
    put_i32(c, (int32_t)n);
    uint8_t *p = reserve(c, 4 * n);
    if (p && n) memcpy(p, items, (size_t)(4 * n));
}

static void put_vecbool(out_cursor *c, const uint8_t *vec) {
    const uint64_t *words;
    int64_t n = bitvector_count(vec, &words);
    if (n < 0) {
        c->failed = PE_ERR_LAYOUT;
        return;
    }
    put_i32(c, (int32_t)n);
    uint8_t *p = reserve(c, 4 * n);
    if (p == NULL) return;
    for (int64_t k = 0; k < n; k++) write_i32_at(p + 4 * k, (int32_t)((words[k / 64] >> (k % 64)) & 1u));
}

static void put_grid(out_cursor *c, const pe_live_spec *spec, const uint8_t *grid) {
    int32_t w = read_i32(grid), h = read_i32(grid + 4);
    const uint8_t *items;
    int64_t n = vector_span(grid + spec->grid_data_at, 4, &items);
    if (w < 0 || h < 0 || n != (int64_t)w * h) {
        c->failed = PE_ERR_LAYOUT;
        return;
    }
    put_i32(c, w);
    put_i32(c, h);
    put_vec4(c, grid + spec->grid_data_at);
}

pe_status pe_live_write(const pe_live_spec *spec, const void *game, uint8_t *buf,
                        int64_t capacity, int64_t *written) {
    const uint8_t *g = (const uint8_t *)game;
    out_cursor c = {buf, buf + capacity, PE_OK};
    const int32_t *prog = spec->program;
    for (int32_t k = 0; k < spec->n_program && !c.failed; k++) {
        int32_t op = prog[2 * k], arg = prog[2 * k + 1];
        switch (op) {
        case PE_OP_CONST: put_i32(&c, arg); break;
        case PE_OP_NAME: {
            put_i32(&c, spec->name_len);
            uint8_t *p = reserve(&c, spec->name_len);
            if (p) memcpy(p, spec->name, (size_t)spec->name_len);
            break;
        }
        case PE_OP_W4:
        case PE_OP_B1: {
            /* a run of plain members in one reservation */
            int32_t run = 1;
            while (k + run < spec->n_program &&
                   (prog[2 * (k + run)] == PE_OP_W4 || prog[2 * (k + run)] == PE_OP_B1))
                run++;
            put_members(&c, prog + 2 * k, run, g);
            k += run - 1;
            break;
        }
        case PE_OP_RNG:
            put_i32(&c, g[arg] != 0);
            put_i32(&c, 0);
            break;
        case PE_OP_ENTITIES: {
            int is_main = arg == spec->map.entities_at;  /* else a trailer's (spawners) */
            put_entities(&c, spec, g + arg, is_main ? g + spec->map.agent_at : NULL);
            break;
        }
        case PE_OP_GRID: put_grid(&c, spec, g + arg); break;
        case PE_OP_VEC4: put_vec4(&c, g + arg); break;
        case PE_OP_VECBOOL: put_vecbool(&c, g + arg); break;
        case PE_OP_END: put_i32(&c, PE_TERMINATOR_VALUE); break;
        default: c.failed = PE_ERR_SPEC;  /* not an op of the program */
        }
    }
    *written = c.failed ? 0 : (int64_t)(c.at - buf);
    return c.failed;
}

pe_status pe_live_games(const pe_live_spec *spec, const void *vecgame, void **out, int64_t max,
                        int64_t *count) {
    const uint8_t *items;
    int64_t n = vector_span((const uint8_t *)vecgame + spec->games_at, 16, &items);
    *count = 0;
    if (n < 0) return PE_ERR_LAYOUT;
    if (n > max) return PE_ERR_SPACE;
    for (int64_t k = 0; k < n; k++) {
        const uint8_t *game = read_ptr(items + 16 * k);
        if (game == NULL || !aligned(game, 8)) return PE_ERR_LAYOUT;
        out[k] = (void *)game;
    }
    *count = n;
    return PE_OK;
}

int pe_live_get_state(void *source, int index, char *buffer, int length) {
    const pe_live_source *src = (const pe_live_source *)source;
    int64_t written = 0;
    if (index < 0 || index >= src->n_games) return -1;
    if (pe_live_write(src->spec, src->games[index], (uint8_t *)buffer, length, &written) != PE_OK)
        return -1;  /* procgen's get_state convention: pe_state_set_accept records the failure */
    return (int)written;
}

/* Where a get_state blob of `length` bytes keeps its entity count (docs/state-format.md §1-§2:
 * B + 4 with B = 152 + L + R1 + R2), or -1 where the blob is too short to say. */
static int64_t entity_count_at(const uint8_t *blob, int64_t length) {
    if (length < 8) return -1;
    int64_t name_len = read_i32(blob + 4);
    if (name_len < 0 || 84 + name_len > length) return -1;
    int64_t r1 = read_i32(blob + 80 + name_len);
    if (r1 < 0 || 92 + name_len + r1 > length) return -1;
    int64_t r2 = read_i32(blob + 88 + name_len + r1);
    int64_t at = 156 + name_len + r1 + r2;
    return (r2 < 0 || at + 4 > length) ? -1 : at;
}

int pe_live_full_get_state(void *source, int index, char *buffer, int length) {
    const pe_live_full_source *src = (const pe_live_full_source *)source;
    int written = src->get_state(src->env, index, buffer, length);
    if (written < 0 || index < 0 || index >= src->source->n_games) return written;
    const pe_live_spec *spec = src->source->spec;
    const uint8_t *g = (const uint8_t *)src->source->games[index];
    const uint8_t *erased = erased_agent(g + spec->map.agent_at, g + spec->map.entities_at);
    if (erased == NULL) return written;
    uint8_t *blob = (uint8_t *)buffer;
    int64_t count_at = entity_count_at(blob, written);
    int64_t record = 4 * (int64_t)spec->n_entity_program;
    if (count_at < 0 || (int64_t)written + record > length) return -1;
    int64_t tail = count_at + 4;  /* the records (procgen's, without the player) and the rest */
    memmove(blob + tail + record, blob + tail, (size_t)(written - tail));
    write_i32_at(blob + count_at, read_i32(blob + count_at) + 1);
    out_cursor c = {blob + tail, blob + tail + record, PE_OK};
    put_members(&c, spec->entity_program, spec->n_entity_program, erased);
    return c.failed ? -1 : written + (int)record;
}

/* ---- stepping (procgen 0.10.7 src/game.cpp:120-155 without observe()) ---- */

void pe_live_prepare(const pe_live_spec *spec, void *game) {
    spec->prepare_for_drawing(game, spec->render_height);
}

static inline void call_virtual(void *object, int32_t slot) {
    pe_game_fn const *vtable = *(pe_game_fn const *const *)object;
    vtable[slot](object);
}

void pe_live_observe(const pe_live_spec *spec, void *game) { call_virtual(game, spec->observe_slot); }

/* The part of Game::step after the episode's reset (or when there is none). */
static void finish_step(const pe_live_spec *spec, uint8_t *g) {
    if (g[spec->use_sequential_levels_at] && g[spec->level_complete_at]) g[spec->done_at] = 0;
    g[spec->episode_done_at] = g[spec->done_at];
    pe_live_prepare(spec, g);
}

typedef struct {
    const pe_live_source *source;
    const int32_t *actions;
    int64_t first;
    pe_state_set *set;
    pe_state_set *terminal_set;
    const pe_game_spec *game_spec;
    int flags;
    pe_live_outputs *outputs;
} step_job;

static void write_and_measure(pe_state_set *set, int64_t i, const pe_live_spec *spec, void *game,
                              const pe_game_spec *game_spec) {
    int64_t written = 0;
    if (pe_live_write(spec, game, set->buffers[i], set->capacity, &written) != PE_OK)
        written = -1;  /* recorded as a failed write, as a failed get_state is */
    pe_state_set_accept(set, i, written, game_spec, "live game");
}

int pe_live_step_game(const pe_live_spec *spec, void *game, int32_t action, int flags, int64_t i,
                      pe_state_set *terminal_set, const pe_game_spec *game_spec,
                      pe_live_outputs *out) {
    uint8_t *g = (uint8_t *)game;
    if ((flags & PE_LIVE_RESET_ONLY) && !out->pending[i]) return 0;  /* not in reset_mask */
    out->terminal[i] = 0;
    out->truncated[i] = 0;
    if (out->pending[i]) {  /* a deferred reset: this step only starts the next episode */
        out->pending[i] = 0;
        spec->game_reset(g);
        finish_step(spec, g);
        return 1;
    }
    write_i32_at(g + spec->cur_time_at, read_i32(g + spec->cur_time_at) + 1);
    int will_force_reset = 0;
    if (action == -1) {
        action = read_i32(g + spec->default_action_at);
        will_force_reset = 1;
    }
    write_i32_at(g + spec->action_at, action);
    write_f32_at(g + spec->reward_at, 0.0f);
    g[spec->done_at] = 0;
    g[spec->level_complete_at] = 0;
    call_virtual(g, spec->game_step_slot);
    int ended_by_game = g[spec->done_at] != 0;
    int timed_out = read_i32(g + spec->cur_time_at) >= read_i32(g + spec->timeout_at);
    int done = ended_by_game || will_force_reset || timed_out;
    g[spec->done_at] = (uint8_t)done;
    float reward = read_f32(g + spec->reward_at);
    write_f32_at(g + spec->total_reward_at, read_f32(g + spec->total_reward_at) + reward);
    if (reward != 0.0f) {
        write_i32_at(g + spec->last_reward_timer_at, 10);
        write_f32_at(g + spec->last_reward_at, reward);
    }
    write_i32_at(g + spec->prev_level_seed_at, read_i32(g + spec->current_level_seed_at));
    if (done) {
        out->truncated[i] = (uint8_t)!ended_by_game;
        pe_live_prepare(spec, g);  /* the terminal frame's camera */
        if (terminal_set != NULL) {
            write_and_measure(terminal_set, i, spec, g, game_spec);
            out->terminal[i] = 1;
        }
        if (flags & PE_LIVE_DEFER_RESET) {
            out->pending[i] = 1;
            return 1;
        }
        spec->game_reset(g);
    }
    finish_step(spec, g);
    return 1;
}

static void step_one(void *raw, int64_t k) {
    step_job *job = (step_job *)raw;
    const pe_live_spec *spec = job->source->spec;
    void *g = job->source->games[k];
    int64_t i = job->first + k;
    if (pe_live_step_game(spec, g, job->actions[k], job->flags, i, job->terminal_set,
                          job->game_spec, job->outputs) &&
        job->set != NULL)
        write_and_measure(job->set, i, spec, g, job->game_spec);
}

static pe_status first_failure(const pe_state_set *set, int64_t first, int32_t count,
                               int64_t *bad_index, pe_error *err) {
    for (int64_t i = first; i < first + count; i++) {
        if (set->status[i] != PE_OK) {
            *bad_index = i;
            *err = set->errors[i];
            return set->status[i];
        }
    }
    return PE_OK;
}

pe_status pe_live_step(pe_pool *pool, const pe_live_source *source, const int32_t *actions,
                       int32_t count, int64_t first, pe_state_set *set, pe_state_set *terminal_set,
                       const pe_game_spec *game_spec, int flags, pe_live_outputs *outputs,
                       int64_t *bad_index, pe_error *err) {
    *bad_index = -1;
    int64_t slots = set != NULL ? set->n : terminal_set != NULL ? terminal_set->n : INT64_MAX;
    if (first < 0 || count < 0 || count > source->n_games || first + count > slots ||
        (terminal_set != NULL && first + count > terminal_set->n)) {
        err->status = PE_ERR_SPEC;
        err->offset = 0;
        err->field = "step range";
        return PE_ERR_SPEC;
    }
    step_job job = {source, actions, first, set, terminal_set, game_spec, flags, outputs};
    pe_pool_run(pool, count, step_one, &job);
    pe_status status = set != NULL ? first_failure(set, first, count, bad_index, err) : PE_OK;
    if (status != PE_OK || terminal_set == NULL) return status;
    for (int64_t i = first; i < first + count; i++)
        if (outputs->terminal[i] && terminal_set->status[i] != PE_OK) {
            *bad_index = i;
            *err = terminal_set->errors[i];
            return terminal_set->status[i];
        }
    return PE_OK;
}
