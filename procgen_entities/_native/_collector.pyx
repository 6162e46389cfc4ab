# cython: language_level=3
"""Marshalling for csrc/state_set.c, csrc/live_game.c and csrc/observation.c: procgen's states
(from its get_state or read from its live games, stepped or not) on a thread pool, parsed in
place, and the observations built from them (ObservationBuilder).

Collecting, stepping and building use the pool; filling the scalars and copying a ragged
build's rows cost a few µs per state and run on the calling thread, where they are cheaper
than a hand-off.

The Python side decides what to observe (procgen_entities/observation.py's ObservationSpec makes
the builder's arguments and arrays, typed dataclasses read here by attribute); these classes hold
the C objects, check shapes and release the GIL around every C call.
"""
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uintptr_t

from libc.stdlib cimport calloc, free

from procgen_entities._native._parser cimport GameSpec
from procgen_entities._native._status cimport check_status
from procgen_entities._native.live_game cimport *
from procgen_entities._native.observation cimport *
from procgen_entities._native.episodes cimport pe_episode_step
from procgen_entities._native.padding cimport pe_pad_rows
from procgen_entities._native.state_parser cimport (PE_ENTITY_FIELDS, PE_MAX_TRAILER_ITEMS, PE_OK,
                                                    PE_ERR_SPEC, PE_S_N_SCALARS_MAX, PE_T_I32,
                                                    PE_T_VEC_ENTITY, pe_error, pe_scalar_count,
                                                    pe_status)
from procgen_entities._native.state_set cimport *
from procgen_entities._native.thread_pool cimport pe_pool, pe_pool_create, pe_pool_destroy
from procgen_entities._native.tilemap cimport tm_check_spec, tm_spec

from procgen_entities.errors import LayoutError, UsageError

import numpy as np

#: procgen's own get_state buffer size; a smaller buffer makes procgen abort the process.
DEFAULT_CAPACITY = 1 << 20
FEATURE_REL_X = PE_FEATURE_REL_X
CELL_OUTSIDE = PE_CELL_OUTSIDE
FEATURE_REL_Y = PE_FEATURE_REL_Y
MAX_SLOTS = PE_MAX_SLOTS
DEFER_RESET = PE_LIVE_DEFER_RESET
RESET_ONLY = PE_LIVE_RESET_ONLY
#: The live write program's ops (pe_live_op) by the names engine/layout.py builds programs with.
LIVE_OPS = {
    "const": PE_OP_CONST, "name": PE_OP_NAME, "w4": PE_OP_W4, "b1": PE_OP_B1, "rng": PE_OP_RNG,
    "entities": PE_OP_ENTITIES, "grid": PE_OP_GRID, "vec4": PE_OP_VEC4, "vecbool": PE_OP_VECBOOL,
    "end": PE_OP_END,
}


cdef int _copy_members(int32_t *at, uint8_t *kinds, list members, Py_ssize_t limit,
                       str what) except -1:
    if len(members) > limit:
        raise UsageError(f"read map: more {what} than {limit}")
    for i, (offset, kind) in enumerate(members):
        if offset < 0 or kind < PE_T_I32 or kind > PE_T_VEC_ENTITY:
            raise UsageError(f"read map: invalid {what} member {i}")
        at[i] = offset
        kinds[i] = kind
    return 0


cdef int _set_read_map(pe_live_map *map, dict read_map) except -1:
    """Where a live game keeps what an observation reads: (offset, kind) per scalar, trailer
    item and entity field, from the layout table (engine/layout.py live_read_map)."""
    if len(read_map["scalars"]) != pe_scalar_count() or len(read_map["entity"]) != PE_ENTITY_FIELDS:
        raise UsageError("read map: one member per scalar and per entity field")
    _copy_members(map.scalar_at, map.scalar_kind, read_map["scalars"], PE_S_N_SCALARS_MAX,
                  "scalars")
    _copy_members(map.trailer_at, map.trailer_kind, read_map["trailer"], PE_MAX_TRAILER_ITEMS,
                  "trailer items")
    _copy_members(map.entity_at, map.entity_kind, read_map["entity"], PE_ENTITY_FIELDS,
                  "entity fields")
    map.entities_at = read_map["entities"]
    map.agent_at = read_map["agent"]
    map.grid_at = read_map["grid"]
    return 0


cdef void _point_plan(pe_entity_plan *plan, const int32_t[::1] type_to_slot,
                      const int32_t[::1] feature_start, const int32_t[::1] features,
                      const int32_t[::1] condition, const uint8_t[::1] windowed):
    """Point an entity plan at its (already checked, caller-kept) arrays."""
    cdef Py_ssize_t n_slots = condition.shape[0]
    plan.n_slots = <int32_t>n_slots
    plan.lut_size = <int32_t>type_to_slot.shape[0]
    plan.type_to_slot = &type_to_slot[0] if type_to_slot.shape[0] else NULL
    plan.feature_start = &feature_start[0]
    plan.features = &features[0] if features.shape[0] else NULL
    plan.condition = &condition[0] if n_slots else NULL
    plan.windowed = &windowed[0] if n_slots else NULL


cdef class LiveGames:
    """A pe_live_spec (the write program, step offsets, procgen's functions) and the game objects
    of each procgen vec env (group) it reads. Built by procgen_entities/engine from a verified
    layout; the addresses it is given are trusted."""
    cdef pe_live_spec spec
    cdef object _keep
    cdef void **games
    cdef pe_live_source *sources  # one per group, then one over all groups
    cdef readonly int num_groups
    cdef readonly Py_ssize_t num_games
    cdef object _starts, _sizes

    def __cinit__(self, const int32_t[::1] program, const int32_t[::1] entity_program,
                  bytes name, dict offsets, int game_step_slot, int observe_slot,
                  uintptr_t reset_address, uintptr_t prepare_address, float render_height,
                  list group_sizes, dict read_map):
        if program.shape[0] % 2 or entity_program.shape[0] % 2 or program.shape[0] == 0:
            raise UsageError("programs are (op, arg) pairs")
        if reset_address == 0 or prepare_address == 0 or not group_sizes:
            raise UsageError("invalid live game spec")
        if any(size < 1 for size in group_sizes):
            raise UsageError("every group needs at least one game")
        self._keep = (program, entity_program, name)
        self.spec.program = &program[0]
        self.spec.n_program = <int32_t>(program.shape[0] // 2)
        self.spec.entity_program = &entity_program[0] if entity_program.shape[0] else NULL
        self.spec.n_entity_program = <int32_t>(entity_program.shape[0] // 2)
        self.spec.name = name
        self.spec.name_len = <int32_t>len(name)
        self.spec.games_at = offsets["games"]
        self.spec.grid_data_at = offsets["grid_data"]
        self.spec.action_at = offsets["action"]
        self.spec.cur_time_at = offsets["cur_time"]
        self.spec.reward_at = offsets["reward"]
        self.spec.done_at = offsets["done"]
        self.spec.level_complete_at = offsets["level_complete"]
        self.spec.timeout_at = offsets["timeout"]
        self.spec.total_reward_at = offsets["total_reward"]
        self.spec.last_reward_timer_at = offsets["last_reward_timer"]
        self.spec.last_reward_at = offsets["last_reward"]
        self.spec.prev_level_seed_at = offsets["prev_level_seed"]
        self.spec.current_level_seed_at = offsets["current_level_seed"]
        self.spec.use_sequential_levels_at = offsets["use_sequential_levels"]
        self.spec.episode_done_at = offsets["episode_done"]
        self.spec.default_action_at = offsets["default_action"]
        self.spec.game_step_slot = game_step_slot
        self.spec.observe_slot = observe_slot
        self.spec.game_reset = <pe_game_fn>reset_address
        self.spec.prepare_for_drawing = <pe_draw_prep_fn>prepare_address
        self.spec.render_height = render_height
        _set_read_map(&self.spec.map, read_map)
        self.num_groups = len(group_sizes)
        self.num_games = sum(group_sizes)
        self._sizes = [int(size) for size in group_sizes]
        self._starts = [sum(self._sizes[:g]) for g in range(self.num_groups)]
        cdef int g
        cdef Py_ssize_t start
        self.games = <void **>calloc(self.num_games, sizeof(void *))
        self.sources = <pe_live_source *>calloc(self.num_groups + 1, sizeof(pe_live_source))
        if self.games == NULL or self.sources == NULL:
            raise MemoryError()
        for g in range(self.num_groups + 1):
            self.sources[g].spec = &self.spec
            start = self._starts[g] if g < self.num_groups else 0
            self.sources[g].games = self.games + start
            self.sources[g].n_games = 0

    def __dealloc__(self):
        free(self.games)
        free(self.sources)

    cdef int _check_group(self, int group) except -1:
        """Groups 0..num_groups-1, or -1 for all of them at once."""
        if group < -1 or group >= self.num_groups:
            raise IndexError(group)
        return 0

    cdef pe_live_source *_source(self, int group):
        return &self.sources[self.num_groups if group == -1 else group]

    def attach(self, int group, uintptr_t vecgame):
        """Read the game objects of a group's VecGame (again after anything that may reallocate
        them); all groups are steppable together once each is attached."""
        if group < 0 or group >= self.num_groups:
            raise IndexError(group)
        cdef int64_t n = 0, expected = self._sizes[group]
        cdef pe_status status
        self.sources[group].n_games = 0
        self.sources[self.num_groups].n_games = 0
        with nogil:
            status = pe_live_games(&self.spec, <const void *>vecgame,
                                   <void **>self.sources[group].games, expected, &n)
        check_status(status)
        if n != expected:
            raise LayoutError(f"procgen's vec env holds {n} games, expected {expected}")
        self.sources[group].n_games = n
        if all(self.sources[g].n_games for g in range(self.num_groups)):
            self.sources[self.num_groups].n_games = self.num_games

    def detach(self):
        for g in range(self.num_groups + 1):
            self.sources[g].n_games = 0

    def game_addresses(self, int group):
        self._check_group(group)
        cdef pe_live_source *source = self._source(group)
        return [<uintptr_t>source.games[k] for k in range(source.n_games)]

    def write_state(self, int group, Py_ssize_t k, Py_ssize_t capacity=DEFAULT_CAPACITY):
        """One game's state as get_state bytes with empty RNG texts."""
        self._check_group(group)
        cdef pe_live_source *source = self._source(group)
        if k < 0 or k >= source.n_games:
            raise IndexError(k)
        buf = bytearray(capacity)
        cdef unsigned char[::1] view = buf
        cdef int64_t n = 0
        cdef pe_status status
        with nogil:
            status = pe_live_write(&self.spec, source.games[k], &view[0], capacity, &n)
        check_status(status)
        return bytes(buf[:n])

    def observe(self, int group):
        """Each game's own observe() (render into gym3's buffers)."""
        self._check_group(group)
        cdef pe_live_source *source = self._source(group)
        cdef int64_t k
        with nogil:
            for k in range(source.n_games):
                pe_live_observe(&self.spec, source.games[k])


cdef class StateCollector:
    """Per-env state buffers and a thread pool."""
    cdef pe_pool *pool
    cdef pe_state_set *set
    cdef GameSpec spec
    cdef readonly int num_threads
    cdef readonly Py_ssize_t num_states

    def __cinit__(self, GameSpec spec, Py_ssize_t num_states, int num_threads,
                  Py_ssize_t capacity=DEFAULT_CAPACITY):
        if num_threads < 1:
            raise UsageError(f"num_threads must be >= 1, got {num_threads}")
        if num_states < 1:
            raise UsageError(f"num_states must be >= 1, got {num_states}")
        self.spec = spec
        self.num_threads = num_threads
        self.num_states = num_states
        self.set = pe_state_set_create(num_states, capacity)
        self.pool = pe_pool_create(num_threads)
        if self.set == NULL or self.pool == NULL:
            self.close()
            raise MemoryError("could not create the state buffers or the thread pool")

    def __dealloc__(self):
        self.close()

    def close(self):
        """Join the pool and free the buffers; safe to call more than once."""
        if self.pool != NULL:
            with nogil:
                pe_pool_destroy(self.pool)
            self.pool = NULL
        if self.set != NULL:
            pe_state_set_destroy(self.set)
            self.set = NULL

    cdef int _check_open(self) except -1:
        if self.pool == NULL:
            raise RuntimeError("the state collector is closed")
        return 0

    def collect(self, uintptr_t get_state, uintptr_t env, int count, Py_ssize_t first):
        """procgen get_state for envs [0, count) of `env` into slots [first, first + count)."""
        self._check_open()
        cdef int64_t bad_index = -1
        cdef pe_error err
        cdef pe_status status
        with nogil:
            status = pe_collect(self.pool, <pe_get_state_fn>get_state, <void *>env, count, first,
                                self.set, &self.spec.spec, &bad_index, &err)
        check_status(status, &err, bad_index)

    def fill(self, double[:, ::1] scalars, double[:, ::1] trailer_scalars,
             int32_t[:, :, ::1] grid=None):
        """Header/base scalars [n, S], trailer scalars [n, T] and optionally grids [n, H, W]."""
        self._check_open()
        cdef Py_ssize_t n = self.num_states
        if scalars.shape[0] != n or scalars.shape[1] != pe_scalar_count():
            raise UsageError("scalars has the wrong shape")
        if trailer_scalars.shape[0] != n or trailer_scalars.shape[1] != self.spec.n_trailer_scalars:
            raise UsageError("trailer_scalars has the wrong shape")
        cdef int32_t *grid_ptr = NULL
        cdef Py_ssize_t i
        if grid is not None:
            for i in range(n):
                if (self.set.layouts[i].height != grid.shape[1]
                        or self.set.layouts[i].width != grid.shape[2]):
                    raise UsageError("grid has the wrong shape for the collected states")
            if grid.shape[0] != n:
                raise UsageError("grid has the wrong number of states")
            if grid.shape[1] * grid.shape[2]:
                grid_ptr = &grid[0, 0, 0]
        cdef double *trailer_ptr = &trailer_scalars[0, 0] if trailer_scalars.shape[1] else NULL
        with nogil:
            pe_fill_states(NULL, self.set, &self.spec.spec, &scalars[0, 0], trailer_ptr,
                           grid_ptr)

    def vector_heads(self, double[:, :, ::1] heads, int64_t[:, ::1] lengths):
        """The first heads.shape[2] items of each trailer vector, zero-padded, and the lengths."""
        self._check_open()
        cdef Py_ssize_t n_vec = self.spec.n_trailer_vectors
        if (heads.shape[0] != self.num_states or heads.shape[1] != n_vec
                or lengths.shape[0] != self.num_states or lengths.shape[1] != n_vec):
            raise UsageError("heads/lengths have the wrong shape")
        if n_vec == 0 or heads.shape[2] == 0:
            return
        with nogil:
            pe_fill_vector_heads(NULL, self.set, &self.spec.spec, <int32_t>heads.shape[2],
                                 &heads[0, 0, 0], &lengths[0, 0])

    def collect_live(self, LiveGames live, int group, Py_ssize_t first):
        """Write the states of a group's live games into slots [first, first + n)."""
        self._check_open()
        live._check_group(group)
        cdef int64_t bad_index = -1
        cdef pe_error err
        cdef pe_status status
        cdef pe_live_source *source = live._source(group)
        with nogil:
            status = pe_collect(self.pool, pe_live_get_state, <void *>source, <int32_t>source.n_games,
                                first, self.set, &self.spec.spec, &bad_index, &err)
        check_status(status, &err, bad_index)

    def collect_full(self, LiveGames live, int group, uintptr_t get_state, uintptr_t env,
                     Py_ssize_t first):
        """procgen get_state (`get_state`, `env`: the group's vec env) for a group's live games
        into slots [first, first + n), with the player put back first where procgen erased it
        (pe_live_full_get_state)."""
        self._check_open()
        live._check_group(group)
        if group < 0:
            raise IndexError(group)
        cdef int64_t bad_index = -1
        cdef pe_error err
        cdef pe_status status
        cdef pe_live_full_source full
        full.get_state = <pe_get_state_fn>get_state
        full.env = <void *>env
        full.source = live._source(group)
        if full.source.n_games == 0:
            raise RuntimeError("no live games attached")
        with nogil:
            status = pe_collect(self.pool, pe_live_full_get_state, <void *>&full,
                                <int32_t>full.source.n_games, first, self.set, &self.spec.spec,
                                &bad_index, &err)
        check_status(status, &err, bad_index)

    def step_live(self, LiveGames live, int group, const int32_t[::1] actions, Py_ssize_t first,
                  StateCollector terminal, int flags, uint8_t[::1] truncated,
                  uint8_t[::1] terminal_written, uint8_t[::1] pending, bint write=True):
        """Step a group's games headlessly with actions, their states into [first, first + n)
        (write=False: nothing written, the game logic alone); terminal states of finished
        episodes into `terminal` (None: not captured)."""
        self._check_open()
        live._check_group(group)
        cdef pe_live_source *source = live._source(group)
        cdef Py_ssize_t n = source.n_games
        if n == 0:
            raise RuntimeError("no live games attached")
        if actions.shape[0] != n:
            raise UsageError(f"expected {n} actions, got {actions.shape[0]}")
        if first < 0 or first + n > self.num_states:
            raise UsageError("step range out of bounds")
        if (truncated.shape[0] != self.num_states or terminal_written.shape[0] != self.num_states
                or pending.shape[0] != self.num_states):
            raise UsageError("per-env outputs must have one entry per state")
        cdef pe_state_set *terminal_set
        cdef pe_live_outputs outputs
        _live_outputs(terminal, self.num_states, truncated, terminal_written, pending, &outputs,
                      &terminal_set)
        cdef int64_t bad_index = -1
        cdef pe_error err
        cdef pe_status status
        with nogil:
            status = pe_live_step(self.pool, source, &actions[0], <int32_t>n, first,
                                  self.set if write else NULL, terminal_set, &self.spec.spec,
                                  flags, &outputs, &bad_index, &err)
        check_status(status, &err, bad_index)

    def collected(self):
        """Per state: does its slot hold a validated state (the last collect or step of it)?"""
        self._check_open()
        return np.array([self.set.status[i] == PE_OK for i in range(self.num_states)], dtype=bool)

    def state_bytes(self, Py_ssize_t i):
        """A copy of the raw get_state bytes of state i from the last collect."""
        self._check_open()
        if i < 0 or i >= self.num_states:
            raise IndexError(i)
        return <bytes>(<char *>self.set.buffers[i])[:self.set.lengths[i]]


cdef int _live_outputs(StateCollector terminal, Py_ssize_t n, uint8_t[::1] truncated,
                       uint8_t[::1] terminal_written, uint8_t[::1] pending,
                       pe_live_outputs *outputs, pe_state_set **terminal_set) except -1:
    """The per-env outputs of a live step (and the terminal collector's set, NULL for None),
    shared by StateCollector.step_live and ObservationBuilder.step_live."""
    terminal_set[0] = NULL
    if terminal is not None:
        terminal._check_open()
        if terminal.num_states != n:
            raise UsageError("the terminal collector has another size")
        terminal_set[0] = terminal.set
    outputs.truncated = &truncated[0]
    outputs.terminal = &terminal_written[0]
    outputs.pending = &pending[0]
    return 0


def pad_rows(const float[:, ::1] rows, const int64_t[::1] counts, float[:, :, ::1] out,
             uint8_t[:, ::1] mask, int64_t[::1] dropped, int cx=-1, int cy=-1,
             const float[:, ::1] player=None):
    """csrc/padding.h: rows [sum(counts), F] into out [n, cap, F] and mask [n, cap], nearest to
    the player first when an env has more than cap rows; dropped[n] counts the rest."""
    cdef Py_ssize_t n = counts.shape[0], i
    cdef int64_t total = 0
    for i in range(n):
        if counts[i] < 0:
            raise UsageError("negative row count")
        total += counts[i]
    if total != rows.shape[0] or out.shape[0] != n or mask.shape[0] != n or dropped.shape[0] != n:
        raise UsageError("rows, counts, out, mask and dropped disagree on their sizes")
    if out.shape[2] != rows.shape[1] or mask.shape[1] != out.shape[1]:
        raise UsageError("out must be [n, cap, F] for rows [total, F], mask [n, cap]")
    if player is not None and (player.shape[0] != n or player.shape[1] != 2):
        raise UsageError("player must be [n, 2]")
    cdef const float *rows_ptr = &rows[0, 0] if rows.shape[0] * rows.shape[1] else NULL
    cdef float *out_ptr = &out[0, 0, 0] if out.shape[0] * out.shape[1] * out.shape[2] else NULL
    cdef uint8_t *mask_ptr = &mask[0, 0] if mask.shape[0] * mask.shape[1] else NULL
    cdef const float *player_ptr = &player[0, 0] if player is not None and n else NULL
    cdef pe_status status
    if n == 0:
        return
    cdef float no_rows[1]
    if rows_ptr == NULL:
        rows_ptr = no_rows
    with nogil:
        status = pe_pad_rows(rows_ptr, &counts[0], n, <int32_t>rows.shape[1],
                             <int32_t>out.shape[1], cx, cy, player_ptr, out_ptr, mask_ptr,
                             &dropped[0])
    check_status(status)


def episode_step(const uint8_t[::1] resetting, float[::1] reward, const uint8_t[::1] done,
                 uint8_t[::1] terminated, uint8_t[::1] truncated, double[::1] returns,
                 int64_t[::1] lengths, float[::1] final_return, int32_t[::1] final_length):
    """csrc/episodes.h: one step's episode accounting of n envs (every array [n]); returns how
    many episodes ended."""
    cdef Py_ssize_t n = resetting.shape[0]
    if (reward.shape[0] != n or done.shape[0] != n or terminated.shape[0] != n
            or truncated.shape[0] != n or returns.shape[0] != n or lengths.shape[0] != n
            or final_return.shape[0] != n or final_length.shape[0] != n):
        raise UsageError(f"episode_step: every array must have {n} entries")
    if n == 0:
        return 0
    cdef int64_t ended
    with nogil:
        ended = pe_episode_step(n, &resetting[0], &reward[0], &done[0], &terminated[0],
                                &truncated[0], &returns[0], &lengths[0], &final_return[0],
                                &final_length[0])
    return ended


GLOBAL_OPS = {"scalar": PE_G_SCALAR, "trailer": PE_G_TRAILER, "step_fraction": PE_G_STEP_FRACTION,
              "eat_time_left": PE_G_EAT_TIME_LEFT, "edible": PE_G_EDIBLE,
              "difference": PE_G_DIFFERENCE, "is_zero": PE_G_IS_ZERO,
              "vector_item": PE_G_VECTOR_ITEM, "on_ground": PE_G_ON_GROUND}
DERIVED_IS_TARGET = PE_D_IS_TARGET
IMAGE_CENTRES = {"camera": PE_IMAGE_CAMERA, "player": PE_IMAGE_PLAYER}
#: The bit of each distribution mode in an entity plan's ``windowed`` masks (csrc/state_set.h
#: pe_mode_bit; "other": a code no mode has).
MODE_BITS = {"easy": PE_MODE_EASY_BIT, "hard": PE_MODE_HARD_BIT,
             "extreme": PE_MODE_EXTREME_BIT, "memory": PE_MODE_MEMORY_BIT,
             "other": PE_MODE_OTHER_BIT}


cdef int _tile_spec(tm_spec *spec, table) except -1:
    """A tilemap.TileTable (csrc/tilemap.h's tm_spec, field for field)."""
    lut = table.lut
    spec.n_classes, spec.oob_class = table.n_classes, table.oob_class
    spec.base_class, spec.top_class = table.base_class, table.top_class
    spec.lut = <const int8_t *><const char *>lut
    spec.lut_size = <int32_t>len(lut)
    check_status(tm_check_spec(spec))
    return 0


cdef class ObservationBuilder:
    """csrc/observation.h: the observation of every state in one native call (GIL released, on
    the collector's pool), from a state set or from the live games: padded into fixed arrays
    (EntityVectorEnv), or ragged (``args.ragged``, ProcgenVecEnv): every row of each type,
    returned as flat [rows, width] arrays with the rows of each state counted. Built from an
    observation.BuilderArgs (what observation.ObservationSpec makes); a build writes an
    observation.PaddedArrays or RaggedArrays."""
    cdef pe_obs_builder *builder
    cdef pe_obs_spec spec
    cdef pe_entity_plan plan
    cdef tm_spec tiles, image
    cdef object _keep
    cdef object _columns
    cdef int32_t widths[PE_OBS_MAX_TYPES]            # ragged: output width, -1: not returned
    cdef const int32_t *columns[PE_OBS_MAX_TYPES]    # ragged: the kept columns, NULL: all
    cdef int64_t _no_counts[1]
    cdef float _no_rows[1]
    cdef readonly Py_ssize_t num_states
    cdef readonly int n_types
    cdef readonly int n_globals
    cdef readonly int image_size
    cdef readonly bint ragged

    def __cinit__(self, args):
        """args: an observation.BuilderArgs (its docstring says what each field holds)."""
        cdef GameSpec game = args.game
        plan = args.plan
        cdef const int32_t[::1] type_to_slot = plan.type_to_slot
        cdef const int32_t[::1] feature_start = plan.feature_start
        cdef const int32_t[::1] features = plan.features, condition = plan.condition
        cdef const uint8_t[::1] windowed = plan.windowed
        cdef const int32_t[::1] derived = args.derived
        n_slots = condition.shape[0]
        if (feature_start.shape[0] != n_slots + 1 or windowed.shape[0] != n_slots
                or features.shape[0] < feature_start[n_slots] or derived.shape[0] < feature_start[n_slots]):
            raise UsageError("entity plan arrays have inconsistent lengths")
        if args.num_states < 1:
            raise UsageError(f"num_states must be >= 1, got {args.num_states}")
        self._keep = (game, plan, args.derived, args.tiles, args.image, args.marks)
        self.num_states = args.num_states
        _point_plan(&self.plan, type_to_slot, feature_start, features, condition, windowed)
        self.spec.plan = &self.plan
        self.spec.derived = &derived[0] if derived.shape[0] else NULL
        self.spec.target_vector = args.target_vector
        self._set_tiles(args, n_slots)
        self._set_types(args.types, args.player, args.global_ops, args.support)
        self._set_ragged(args.ragged)
        cdef pe_status status = PE_ERR_SPEC
        self.builder = pe_obs_create(&self.spec, &game.spec, self.num_states, &status)
        if self.builder == NULL:
            check_status(PE_ERR_SPEC if status == PE_OK else status)

    cdef int _set_tiles(self, args, Py_ssize_t n_slots) except -1:
        """The tilemap types' and the class image's tile tables, and the image's marks."""
        cdef const uint8_t[::1] mark_values
        if args.marks is not None:
            mark_values = args.marks
            if args.image is None or mark_values.shape[0] != n_slots:
                raise UsageError("marks need an image and one value per entity slot")
        self.spec.tiles = NULL
        self.spec.image = NULL
        self.spec.image_centre = PE_IMAGE_CAMERA
        if args.tiles is not None:
            _tile_spec(&self.tiles, args.tiles)
            self.spec.tiles = &self.tiles
            self.spec.tile_mode, self.spec.chunk = args.tile_mode, args.chunk
        if args.image is not None:
            _tile_spec(&self.image, args.image)
            self.spec.image = &self.image
            self.spec.image_size = args.image_size
            self.spec.image_centre = args.image_centre
            self.image_size = args.image_size
        self.spec.image_marks = &mark_values[0] if args.marks is not None and n_slots else NULL
        self.spec.image_boxes = 1 if args.marks is not None and args.image_boxes else 0
        return 0

    cdef int _set_types(self, tuple types, player, const int32_t[:, ::1] global_ops,
                        support) except -1:
        """types: observation.OutputType per output type; player: PlayerColumns; global_ops
        [G, 3]; support: Support."""
        if len(types) > PE_OBS_MAX_TYPES or global_ops.shape[0] > PE_OBS_MAX_GLOBALS:
            raise UsageError("too many output types or global features")
        if (global_ops.shape[0] and global_ops.shape[1] != 3) or len(support.tiles) > PE_OBS_MAX_SUPPORT:
            raise UsageError("global ops are (op, a, b) triples; too many support tiles")
        self.n_types = len(types)
        self.spec.n_types = self.n_types
        for t, kind in enumerate(types):
            self.spec.types[t].cap = kind.cap
            self.spec.types[t].width = kind.width
            self.spec.types[t].cx = kind.cx
            self.spec.types[t].cy = kind.cy
            self.spec.types[t].from_player = kind.from_player
        self.spec.player_type, self.spec.player_cx, self.spec.player_cy = player.type, player.x, player.y
        self.n_globals = global_ops.shape[0]
        self.spec.n_globals = self.n_globals
        for j in range(self.n_globals):
            for c in range(3):
                self.spec.global_ops[3 * j + c] = global_ops[j, c]
        self.spec.support.n_tiles = len(support.tiles)
        for k, tile in enumerate(support.tiles):
            self.spec.support.tiles[k] = tile
        self.spec.support.flag = support.flag
        self.spec.support.at_rest = support.at_rest
        return 0

    cdef int _set_ragged(self, ragged) except -1:
        """The returned types' columns (kept alive in self._columns; C checks them against the
        types' widths at each copy)."""
        cdef const int32_t[::1] view
        self.ragged = ragged is not None
        if ragged is None:
            return 0
        if len(ragged) != self.n_types:
            raise UsageError("ragged: one entry (None or the columns) per output type")
        kept = []
        for t, chosen in enumerate(ragged):
            self.widths[t] = -1
            self.columns[t] = NULL
            if chosen is None:
                continue
            columns = np.ascontiguousarray(chosen, dtype=np.int32).reshape(-1)
            width = self.spec.types[t].width
            if ((columns < 0) | (columns >= width)).any():
                raise UsageError(f"ragged: output type {t} has {width} columns, not {chosen!r}")
            kept.append(columns)
            self.widths[t] = <int32_t>columns.shape[0]
            if columns.tolist() != list(range(width)):
                view = columns
                self.columns[t] = &view[0] if columns.shape[0] else NULL
        self._columns = kept
        return 0

    def __dealloc__(self):
        pe_obs_destroy(self.builder)

    cdef int _outputs(self, pe_obs_out *out, outs, Py_ssize_t count) except -1:
        """outs: an observation.RaggedArrays (a ragged builder) or PaddedArrays, every array
        of `count` rows."""
        if self.ragged:
            self._ragged_outputs(out, outs.counts, count)
        else:
            self._padded_outputs(out, outs.values, outs.masks, outs.image, outs.dropped, count)
        cdef float[:, ::1] g = outs.globals
        if g.shape[0] != count or g.shape[1] != self.n_globals:
            raise UsageError("globals must be [count, G]")
        out.globals = &g[0, 0] if g.size else NULL
        self._step_outputs(out, outs.step, count)
        return 0

    cdef int _ragged_outputs(self, pe_obs_out *out, counts, Py_ssize_t count) except -1:
        cdef int64_t[:, ::1] c = counts
        if c.shape[0] != self.n_types or c.shape[1] != count:
            raise UsageError(f"counts must be [{self.n_types}, {count}]")
        out.counts = &c[0, 0] if c.size else self._no_counts
        out.image = NULL
        out.dropped = NULL
        return 0

    cdef int _padded_outputs(self, pe_obs_out *out, tuple values, tuple masks, image, dropped,
                             Py_ssize_t count) except -1:
        cdef float[:, :, ::1] v
        cdef uint8_t[:, ::1] m
        cdef int64_t[::1] d = dropped
        cdef uint8_t[:, :, ::1] im
        if len(values) != self.n_types or len(masks) != self.n_types:
            raise UsageError("one values and one mask array per output type")
        for t in range(self.n_types):
            v = values[t]
            m = masks[t]
            if (v.shape[0] != count or v.shape[1] != self.spec.types[t].cap
                    or v.shape[2] != self.spec.types[t].width or m.shape[0] != count
                    or m.shape[1] != self.spec.types[t].cap):
                raise UsageError(f"output type {t} must be [{count}, cap, width] with a mask")
            out.values[t] = &v[0, 0, 0] if v.size else NULL
            out.masks[t] = &m[0, 0] if m.size else NULL
            if v.size == 0 and count and self.spec.types[t].cap and self.spec.types[t].width:
                raise UsageError("empty output")
        if d.shape[0] != count:
            raise UsageError("dropped must be [count]")
        out.counts = NULL
        out.dropped = &d[0] if count else NULL
        out.image = NULL
        if self.spec.image != NULL:
            im = image
            if im.shape[0] != count or im.shape[1] != self.image_size or im.shape[2] != self.image_size:
                raise UsageError("image must be [count, size, size]")
            out.image = &im[0, 0, 0]
        return 0

    cdef int _step_outputs(self, pe_obs_out *out, step, Py_ssize_t count) except -1:
        """step: None or an observation.StepArrays (each array None or [count])."""
        out.reward = NULL
        out.done = out.level_complete = NULL
        out.level_seed = out.prev_level_seed = NULL
        if step is None:
            return 0
        arrays = (step.reward, step.done, step.level_complete, step.level_seed,
                  step.prev_level_seed)
        for array in arrays:
            if array is not None and len(array) != count:
                raise UsageError("step values must have one entry per state")
        if count == 0:
            return 0
        cdef float[::1] reward
        cdef uint8_t[::1] done, complete
        cdef int64_t[::1] seed, prev_seed
        if arrays[0] is not None:
            reward = arrays[0]
            out.reward = &reward[0]
        if arrays[1] is not None:
            done = arrays[1]
            out.done = &done[0]
        if arrays[2] is not None:
            complete = arrays[2]
            out.level_complete = &complete[0]
        if arrays[3] is not None:
            seed = arrays[3]
            out.level_seed = &seed[0]
        if arrays[4] is not None:
            prev_seed = arrays[4]
            out.prev_level_seed = &prev_seed[0]
        return 0

    cdef list _rows(self, outs, Py_ssize_t count):
        """After a ragged call: per output type its rows [rows, width] (None: not returned);
        outs.totals [count, 1] gets the rows per state over the returned types."""
        cdef pe_obs_rows out[PE_OBS_MAX_TYPES]
        cdef const int64_t[:, ::1] c = outs.counts
        cdef int64_t[:, ::1] totals = outs.totals
        if totals.shape[0] != count or totals.shape[1] != 1:
            raise UsageError(f"totals must be [{count}, 1]")
        cdef float[:, ::1] view
        cdef int64_t total
        cdef Py_ssize_t t, k
        rows = [None] * self.n_types
        for t in range(self.n_types):
            out[t].rows = NULL
            if self.widths[t] < 0:
                continue
            total = 0
            for k in range(count):
                total += c[t, k]
            rows[t] = np.empty((total, self.widths[t]), dtype=np.float32)
            out[t].rows = self._no_rows
            if total and self.widths[t]:
                view = rows[t]
                out[t].rows = &view[0, 0]
            out[t].capacity = total * self.widths[t]
            out[t].width = self.widths[t]
            out[t].columns = self.columns[t]
        cdef int64_t *totals_ptr = &totals[0, 0] if count else NULL
        cdef pe_error err
        cdef pe_status status
        with nogil:
            status = pe_obs_ragged_rows(NULL, self.builder, count, out, totals_ptr, &err)
        check_status(status, &err)
        return rows

    def from_states(self, StateCollector collector, outs, const int64_t[::1] indices=None):
        """Output state k from the collector's slot indices[k] (None: slot k). Ragged: returns
        the rows as step_live does."""
        collector._check_open()
        cdef Py_ssize_t count = collector.num_states if indices is None else indices.shape[0]
        if count > self.num_states:
            raise UsageError("more states than the builder was made for")
        cdef pe_obs_out out
        self._outputs(&out, outs, count)
        cdef const int64_t *index_ptr = &indices[0] if indices is not None and count else NULL
        cdef int64_t bad_index = -1
        cdef pe_error err
        cdef pe_status status
        if count == 0 and not self.ragged:
            return
        with nogil:
            status = pe_obs_from_states(collector.pool, self.builder, collector.set, index_ptr,
                                        count, &out, &bad_index, &err)
        check_status(status, &err, bad_index)
        return self._rows(outs, count) if self.ragged else None

    def from_live(self, StateCollector collector, LiveGames live, outs):
        """Every live game as it is now (procgen's threads must be idle). Ragged: returns the
        rows as step_live does."""
        collector._check_open()
        cdef pe_live_source *source = live._source(-1)
        if source.n_games != self.num_states:
            raise RuntimeError("no live games attached")
        cdef pe_obs_out out
        self._outputs(&out, outs, self.num_states)
        cdef int64_t bad_index = -1
        cdef pe_error err
        cdef pe_status status
        with nogil:
            status = pe_obs_from_live(collector.pool, self.builder, source, &out, &bad_index, &err)
        check_status(status, &err, bad_index)
        return self._rows(outs, self.num_states) if self.ragged else None

    def step_live(self, StateCollector collector, LiveGames live, const int32_t[::1] actions,
                  StateCollector terminal, int flags, uint8_t[::1] truncated,
                  uint8_t[::1] terminal_written, uint8_t[::1] pending, outs):
        """StateCollector.step_live for every group, but each game read into the outputs
        instead of written as a state (terminal states are still written to `terminal`).
        Ragged: returns per output type None or its rows [rows, width], state after state
        (outs.totals: each state's rows over the returned types)."""
        collector._check_open()
        cdef pe_live_source *source = live._source(-1)
        cdef Py_ssize_t n = self.num_states
        if source.n_games != n:
            raise RuntimeError("no live games attached")
        if (actions.shape[0] != n or truncated.shape[0] != n or terminal_written.shape[0] != n
                or pending.shape[0] != n):
            raise UsageError(f"actions and per-env outputs must have {n} entries")
        cdef pe_state_set *terminal_set
        cdef pe_live_outputs outputs
        _live_outputs(terminal, n, truncated, terminal_written, pending, &outputs, &terminal_set)
        cdef pe_obs_out out
        self._outputs(&out, outs, n)
        cdef int64_t bad_index = -1
        cdef pe_error err
        cdef pe_status status
        with nogil:
            status = pe_obs_step_live(collector.pool, self.builder, source, &actions[0],
                                      terminal_set, &collector.spec.spec, flags, &outputs, &out,
                                      &bad_index, &err)
        check_status(status, &err, bad_index)
        return self._rows(outs, n) if self.ragged else None
