"""Validating saved states before procgen's set_state sees them.

procgen's ``set_state`` trusts its input: a blob that is structurally valid but inconsistent
aborts or segfaults the whole process, inside set_state or a few steps later. ``check_restorable``
refuses a batch unless every blob

1. parses, with the game's invariants (games.py) holding;
2. is of the same game, grid size and options (every field of the header's options section but
   the env index) as the env it replaces;
3. holds only values real states hold: entity types and tile ids seen in real play, and every
   scalar, trailer value (each field of a trailer's entity records, such as starpilot's future
   spawns, included) and entity field within the range measured over long rollouts of the
   game (games.value_ranges), exactly for small integer codes (themes, sprite ids, layers),
   with a margin for counters (up to the time limit), coordinates and velocities; entity floats
   must be finite;
4. has trailer vectors that agree with the level they belong to, where procgen derives them
   from the grid once per level and later trusts them (``_check_trailer_vectors``: chaser's
   free cells and walls, leaper's lanes); a chaser state whose ``is_space_vec`` says "wall"
   everywhere passed every check above and the trial, then died of SIGFPE at the first
   enemy's turn;
4b. has three RNGs as procgen writes them (``_check_rngs``): level_seed_rand_gen and rand_gen
   seeded (procgen draws the next level's seed from the first at the episode's end, after the
   trial below, and ``fassert(is_seeded)`` ends the process), and each text exactly the
   ``operator<<`` form of a std::mt19937 (624 state words below 2**32 and the position
   0..624, single spaces, canonical decimals) that is not the all-zero state. procgen's
   ``operator>>`` leaves a generator it cannot read partly unchanged, so garbage text made
   the levels after a restore depend on the env it was restored into;
4c. has a player procgen keeps (``_check_player``): neither will_erase nor an expire_time set;
5. survives procgen itself: a forked child process restores the whole batch into a fresh procgen
   vec env (no threads), steps it ``probe_steps`` times with every action and renders it. If the
   child crashes, hangs or fails, the batch is refused and this process never touched procgen.
   (Each blob is tried in three copies with their own random actions.)
"""

from __future__ import annotations

import faulthandler
import os
import re
import select
import signal
import struct
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from procgen_entities._native._parser import SCALAR_NAMES, SCALAR_POSITIONS
from procgen_entities.errors import StateDecodeError, UsageError
from procgen_entities.games import (
    ENTITY_FIELDS,
    ENTITY_INT_FIELDS,
    NUM_ACTIONS,
    get_game,
    value_ranges,
)
from procgen_entities.parse import StateBatch, parse_states

__all__ = [
    "OPTION_FIELDS",
    "check_restorable",
    "check_values",
    "mt19937_text_problem",
    "trial_restore",
]

#: Header fields that configure an env (the options section), the env's own index aside.
OPTION_FIELDS = tuple(
    name
    for name, (section, _) in zip(SCALAR_NAMES, SCALAR_POSITIONS)
    if section == 0
    if name != "game_n"
)
#: Entity fields that must be finite (positions, velocities, sizes, angles).
FINITE_FIELDS = ("x", "y", "vx", "vy", "rx", "ry", "rotation", "vrot")
#: Values not held to the measured ranges: seeds and indexes that are arbitrary by design, and
#: the options (compared with the env's own instead).
UNRANGED = (
    frozenset({"current_level_seed", "prev_level_seed", "fixed_asset_seed", "step_rand_int"})
    | frozenset(OPTION_FIELDS)
    | {"game_n"}
)
#: Integer codes with a range this small must lie inside it exactly (sprite ids, themes, layers,
#: modes); wider integer ranges are counters and get a margin as wide as the range.
EXACT_INT_SPAN = 64
#: chaser's wall tile (chaser.cpp: MAZE_WALL = 5); leaper's lane tiles (leaper.cpp: ROAD = 2,
#: WATER = 3).
CHASER_WALL = 5
LEAPER_ROAD, LEAPER_WATER = 2, 3
#: A trial restore's child has hung when it has run this many CPU seconds without a verdict
#: (procgen's hangs spin): CPU time, not wall time, so that a busy machine, which slows the
#: child without making it spin longer, never turns a good batch into "procgen hung" (an
#: evaluation beside two training runs was refused so). Where the child's CPU time cannot be
#: read (no /proc) the wall clock counts instead.
PROBE_TIMEOUT_S = 30.0
#: The wall-clock bound on a child that sleeps instead of spinning (a deadlock; never seen).
PROBE_WALL_LIMIT_S = 600.0
PROBE_COPIES = 3
#: The three RNGs of a state, in the order they are stored (docs/state-format.md §1.1).
RNG_NAMES = ("level_seed_rand_gen", "rand_gen", "asset_rand_gen")
#: What procgen draws from each RNG after a restore. Drawing from an unseeded RandGen is
#: ``fassert(is_seeded)`` (randgen.cpp), a process exit; asset_rand_gen is only drawn from for
#: generated assets, which no state has (it is unseeded in every real state).
RNG_DRAWS = {
    "level_seed_rand_gen": "the next level's seed, at the episode's end (Game::reset)",
    "rand_gen": "step_rand_int, at every step (BasicAbstractGame::game_step)",
}
#: std::mt19937's state: 624 32-bit words, then the position of the next word to use (0..624).
MT_WORDS = 624
#: The longest text operator<< writes: 624 words of up to 10 digits and a space each, then a
#: position of up to 3 digits. A longer text is refused before it is split.
MT_TEXT_MAX = MT_WORDS * 11 + 3
_MT_TEXT = re.compile(rb"(?:(?:0|[1-9][0-9]{0,9}) ){624}(?:0|[1-9][0-9]{0,2})")
_DECIMAL = re.compile(rb"0|[1-9][0-9]*")
_MT_MAX = str(2**32 - 1).encode()


def _refuse(index: int, reason: str, field: str) -> StateDecodeError:
    return StateDecodeError(reason, index=index, offset=0, field=field)


def _check_like(batch: StateBatch, current: StateBatch) -> None:
    assert batch.grid is not None and current.grid is not None  # parsed with grid=True
    if batch.grid.shape[1:] != current.grid.shape[1:]:
        raise _refuse(
            0, f"grid {batch.grid.shape[1:]} differs from the env's {current.grid.shape[1:]}",
            "grid.w",
        )  # fmt: skip
    for name in OPTION_FIELDS:
        differs = np.flatnonzero(batch.scalars[name] != current.scalars[name])
        if len(differs):
            i = int(differs[0])
            raise _refuse(
                i,
                f"option {name} is {batch.scalars[name][i]} in the blob, "
                f"{current.scalars[name][i]} in the env",
                name,
            )
    for name in FINITE_FIELDS:
        bad = np.flatnonzero(~np.isfinite(batch.field(name)))
        if len(bad):
            state = int(np.searchsorted(batch.entity_offsets, bad[0], side="right") - 1)
            raise _refuse(state, f"entity field {name} is not finite", f"entities.{name}")


def _check_player(batch: StateBatch) -> None:
    """The player (entity 0) must stay: procgen erases an entity with will_erase set, or whose
    expire_time (> 0) its life_time passes (entity.cpp step, erase_if_needed), and the episode
    then goes on without a player, which no state can hold (every engine's next states fail).
    Real players never have either (will_erase 0, expire_time -1)."""
    first = batch.entity_offsets[:-1]
    for name, bad in (
        ("will_erase", batch.field("will_erase")[first] != 0),
        ("expire_time", batch.field("expire_time")[first] > 0),
    ):
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            value = batch.field(name)[first[i]]
            raise _refuse(i, f"the player's {name} is {value:g}: procgen would erase the player "
                          "and play on without one", f"entities[0].{name}")  # fmt: skip


def _allowed(lo: float, hi: float, is_int: bool, horizon: float) -> Tuple[float, float]:
    """The accepted interval around a measured [lo, hi]; ``horizon``: the episode's time limit
    (counters such as cur_time or life_time run up to it, further than rollouts may reach)."""
    span = hi - lo
    if is_int:
        pad = 0.0 if span <= EXACT_INT_SPAN else max(span, horizon)
    else:
        pad = span + max(1.0, 0.1 * max(abs(lo), abs(hi)))
    return lo - pad, hi + pad


def _check_ranges(batch: StateBatch, game: str) -> None:
    info = get_game(game)
    measured = value_ranges(game)
    ranges: Dict[str, List[float]] = measured["ranges"]  # type: ignore[assignment]
    kinds = dict(info.trailer)
    timeout_range = ranges.get("scalar.timeout", [0.0, 0.0])
    horizon = float(timeout_range[1])

    def check(
        key: str, values: npt.NDArray[Any], is_int: bool, state_of: Any, required: bool = False
    ) -> None:
        if values.size == 0:
            return
        if key not in ranges:
            if required:  # never held by a measured state: nothing says what procgen accepts
                raise _refuse(int(state_of(0)), f"{key} never holds values in real {game} "
                              "states", key)  # fmt: skip
            return
        lo, hi = _allowed(ranges[key][0], ranges[key][1], is_int, horizon)
        if key in info.reachable:  # what the game's source reaches beyond the rollouts
            lo, hi = min(lo, info.reachable[key][0]), max(hi, info.reachable[key][1])
        bad = np.flatnonzero(~((values >= lo) & (values <= hi)))
        if len(bad):
            raise _refuse(int(state_of(bad[0])), f"{key} = {values[bad[0]]} is outside the values "
                          f"real {game} states hold ([{lo:g}, {hi:g}])", key)  # fmt: skip

    per_state = lambda i: i  # noqa: E731
    for name, values in batch.scalars.items():
        if name not in UNRANGED:
            check(
                f"scalar.{name}", values.astype(np.float64), values.dtype.kind in "iub", per_state
            )
    for name, values in batch.extras.items():
        check(f"trailer.{name}", values.astype(np.float64), kinds[name] != "f", per_state)
    for name, values in batch.vectors.items():
        counts = batch.vector_counts[name]
        owner = np.repeat(np.arange(len(counts)), counts)
        if kinds[name] == "ve":  # entity records (starpilot's future spawns): every field
            for k, field in enumerate(ENTITY_FIELDS):
                column = values[:, k].astype(np.float64)
                is_int = field in ENTITY_INT_FIELDS
                check(f"vector.{name}.{field}", column, is_int, owner.__getitem__, required=True)
        else:
            is_int = kinds[name] != "vf"
            column = values.astype(np.float64)
            check(f"vector.{name}", column, is_int, owner.__getitem__, required=True)
    owner = np.repeat(np.arange(len(batch.entity_counts)), batch.entity_counts)
    for k, field in enumerate(batch.entity_fields):
        is_int = field in ENTITY_INT_FIELDS
        check(f"entity.{field}", batch.entities[:, k].astype(np.float64), is_int, owner.__getitem__)
    _check_ids(batch, game, owner)


def _check_ids(batch: StateBatch, game: str, owner: npt.NDArray[Any]) -> None:
    """Entity types and tile ids: those seen in real states, and the entity types the game
    declares from its source (starpilot's finish line, from t = 500, is in no recorded
    rollout). ``owner``: the state of each entity."""
    info, measured = get_game(game), value_ranges(game)
    seen = set(measured["entity_types"])  # type: ignore[call-overload]
    types = seen | set(info.entity_types) | set(info.ignored_types)
    unknown = np.flatnonzero(~np.isin(batch.field("type"), list(types)))
    if len(unknown):
        raise _refuse(int(owner[unknown[0]]), f"entity type {batch.field('type')[unknown[0]]:g} "
                      f"never occurs in {game}", "entities.type")  # fmt: skip
    tiles = np.asarray(measured["tiles"])
    assert batch.grid is not None
    for i, grid in enumerate(batch.grid):
        if not np.isin(grid, tiles).all():
            raise _refuse(i, f"the grid holds tile ids that never occur in {game}", "grid.data")


def _check_trailer_vectors(batch: StateBatch, game: str) -> None:
    """Trailer vectors that must agree with the state's own grid (checked on every state of
    long rollouts: real states always agree)."""
    check = _TRAILER_CHECKS.get(game)
    if check is None:
        return
    assert batch.grid is not None
    for i in range(len(batch)):
        problem = check(batch, i, batch.grid[i])
        if problem is not None:
            field, reason = problem
            raise _refuse(i, reason, field)


def _chaser_vectors(batch: StateBatch, i: int, grid: npt.NDArray[Any]) -> Optional[Tuple[str, str]]:
    """chaser.cpp game_reset: ``is_space_vec[k]`` is ``grid[k] != MAZE_WALL`` and ``free_cells``
    the indices where it holds; walls never change. Enemies at a junction pick a random
    neighbour that ``is_space_vec`` calls free (``% space_neighbors.size()``), and a missing
    enemy respawns at ``free_cells[step_rand_int % free_cells.size()]``: an empty set is a
    division by zero (SIGFPE), a cell outside the grid an entity outside the maze."""
    space = batch.vector("is_space_vec", i).astype(bool)
    if not np.array_equal(space, grid.ravel() != CHASER_WALL):
        return "vector.is_space_vec", "is_space_vec differs from the grid's walls"
    if not np.array_equal(batch.vector("free_cells", i), np.flatnonzero(space)):
        return "vector.free_cells", "free_cells are not the grid's free cells"
    return None


def _leaper_vectors(batch: StateBatch, i: int, grid: npt.NDArray[Any]) -> Optional[Tuple[str, str]]:
    """leaper.cpp game_reset: one road row per ``road_lane_speeds`` item from ``bottom_road_y``
    up, one water row per ``water_lane_speeds`` item from ``bottom_water_y`` up, the goal row
    after the water; every step spawns cars and logs per lane (any length was accepted)."""
    road, water = batch.vector("road_lane_speeds", i), batch.vector("water_lane_speeds", i)
    bottom_road = int(batch.extras["bottom_road_y"][i])
    bottom_water = int(batch.extras["bottom_water_y"][i])
    for name, bottom, count, tile in (
        ("road_lane_speeds", bottom_road, len(road), LEAPER_ROAD),
        ("water_lane_speeds", bottom_water, len(water), LEAPER_WATER),
    ):
        full = (grid == tile).all(axis=1)  # the rows of this lane kind
        lanes = full[bottom : bottom + count] if 0 <= bottom else full[:0]
        if (
            len(lanes) != count
            or not lanes.all()
            or full[bottom + count : bottom + count + 1].any()
        ):
            return f"vector.{name}", f"{name} has {count} lanes; the grid's rows differ"
    if int(batch.extras["goal_y"][i]) != bottom_water + len(water) + 1:
        return "trailer.goal_y", "goal_y is not the row after the water lanes"
    return None


_TRAILER_CHECKS = {"chaser": _chaser_vectors, "leaper": _leaper_vectors}


def _rngs_of(blob: bytes) -> List[Tuple[str, int, int, bytes]]:
    """(name, byte offset of is_seeded, is_seeded, text) of the three RNGs of a blob that
    parsed (so every offset below is inside it): docs/state-format.md §1-§2."""
    (name_len,) = struct.unpack_from("<i", blob, 4)
    at = 76 + name_len  # level_seed_rand_gen.is_seeded
    out = []
    for name in RNG_NAMES[:2]:
        seeded, length = struct.unpack_from("<ii", blob, at)
        out.append((name, at, seeded, blob[at + 8 : at + 8 + length]))
        at += 8 + length
    (n_entities,) = struct.unpack_from("<i", blob, at + 64)  # the step block, grid_size
    at += 68 + 124 * n_entities + 76  # the entities, the base block: asset_rand_gen
    seeded, length = struct.unpack_from("<ii", blob, at)
    out.append((RNG_NAMES[2], at, seeded, blob[at + 8 : at + 8 + length]))
    return out


def mt19937_text_problem(text: bytes) -> Optional[str]:
    """What keeps ``text`` from being what libstdc++'s ``operator<<`` writes for a
    std::mt19937 (procgen's RandGen::serialize), or None: 625 canonical decimals separated by
    single spaces, the 624 state words below 2**32, then the position (0..624); the all-zero
    state (which draws 0 forever, never reached by seeding) is refused too."""
    if len(text) > MT_TEXT_MAX:
        return f"its text is {len(text)} bytes, longer than any std::mt19937 text ({MT_TEXT_MAX})"
    words = text.split(b" ")
    if len(words) != MT_WORDS + 1:
        return (f"its text holds {len(words)} space-separated word(s), not the {MT_WORDS + 1} "
                "of a std::mt19937 (624 state words and the position)")  # fmt: skip
    if _MT_TEXT.fullmatch(text) is None:  # the slow path only finds the word to name
        for k, word in enumerate(words):
            if _DECIMAL.fullmatch(word) is None:
                return f"word {k} of its text, {word[:16]!r}, is not a decimal number as written"
    # canonical decimals now: a word reaches 2**32 by its length or, at 10 digits, as text
    big = next((k for k, w in enumerate(words[:MT_WORDS]) if (len(w), w) > (10, _MT_MAX)), None)
    if big is not None:
        return f"state word {big} of its text, {words[big].decode()}, is not below 2**32"
    if int(words[-1]) > MT_WORDS:
        return f"its position, {int(words[-1])}, is above {MT_WORDS}"
    if int(words[0]) < 2**31 and words[1:MT_WORDS].count(b"0") == MT_WORDS - 1:
        return "its text is the all-zero std::mt19937 state, which draws 0 forever"
    return None


def _check_rngs(states: Sequence[bytes]) -> None:
    """The three RNGs of every blob: seeded where procgen draws from them, and each text a
    std::mt19937 as procgen writes it (StateDecodeError naming the RNG and the problem)."""
    for i, blob in enumerate(states):
        for name, at, seeded, text in _rngs_of(bytes(blob)):
            if not seeded and name in RNG_DRAWS:
                raise StateDecodeError(
                    f"{name}.is_seeded is 0: procgen draws from it {RNG_DRAWS[name]}, and "
                    "exits on an unseeded RNG (fassert 'is_seeded')",
                    index=i, offset=at, field=f"{name}.is_seeded",
                )  # fmt: skip
            problem = mt19937_text_problem(text)
            if problem is not None:
                raise StateDecodeError(
                    f"{name}: {problem}", index=i, offset=at + 8, field=name
                )  # fmt: skip


def _probe_child(game: str, states: Sequence[bytes], options: Dict[str, Any], steps: int) -> None:
    """Each blob restored PROBE_COPIES times, each copy stepped (and rendered) with its own
    random actions: what happens after a restore depends on the actions taken."""
    from procgen_entities.procgen_envs import make_procgen_env

    copies = list(states) * PROBE_COPIES
    env = make_procgen_env(game, len(copies), **{**options, "num_threads": 0})
    env.callmethod("set_state", copies)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        env.act(rng.integers(0, NUM_ACTIONS, len(copies)).astype(np.int32))
        env.observe()
    env.callmethod("get_state")


def _probe(game: str, states: Sequence[bytes], options: Dict[str, Any], steps: int) -> None:
    """Run set_state + steps + render in a forked child; raise if it does not exit cleanly.

    The child reports its verdict through a pipe rather than only its exit status: where the
    application ignores SIGCHLD the kernel reaps children itself and waitpid() has no status to
    give (it raised ChildProcessError). A pipe closed without a verdict is a crash."""
    verdict_fd, report_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only this thread exists; it never returns to the caller's code
        code = 0
        try:
            os.close(verdict_fd)
            faulthandler.disable()  # a crash here is the expected outcome of a bad blob
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)  # procgen prints its fassert messages to stdout
            os.dup2(devnull, 2)
            _probe_child(game, states, options, steps)
        except BaseException:
            code = 3
        try:
            os.write(report_fd, bytes([code]))
        finally:
            os._exit(code)
    os.close(report_fd)
    try:
        verdict = _read_verdict(verdict_fd, pid)
    finally:
        os.close(verdict_fd)
    if verdict is None:
        os.kill(pid, signal.SIGKILL)
        _reap(pid, time.monotonic() + PROBE_TIMEOUT_S)
        raise _refuse(0, "procgen hung on the restored states", "set_state")
    status = _reap(pid, time.monotonic() + PROBE_TIMEOUT_S)
    if status is not None and os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        raise _refuse(0, f"procgen crashed ({name}) on the restored states", "set_state")
    if verdict == b"":
        raise _refuse(0, "procgen crashed on the restored states", "set_state")
    if verdict != b"\x00" or (status is not None and os.WEXITSTATUS(status) != 0):
        raise _refuse(0, "procgen failed on the restored states", "set_state")


def _read_verdict(fd: int, pid: int) -> Optional[bytes]:
    """The child's one-byte verdict, b"" if it died without one, None once it has hung: spent
    PROBE_TIMEOUT_S of CPU time (of wall time, where that is unreadable) or PROBE_WALL_LIMIT_S
    of wall time without one."""
    started = time.monotonic()
    while True:
        wall = time.monotonic() - started
        cpu = _cpu_seconds(pid)
        if wall >= PROBE_WALL_LIMIT_S or (wall if cpu is None else cpu) >= PROBE_TIMEOUT_S:
            return None
        ready, _, _ = select.select([fd], [], [], 0.25)
        if ready:
            return os.read(fd, 1)


def _cpu_seconds(pid: int) -> Optional[float]:
    """CPU seconds process ``pid`` has run (utime + stime, /proc/PID/stat fields 14 and 15),
    or None where /proc does not say (not Linux; the process is gone)."""
    try:
        fields = _proc_stat(pid)
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _proc_stat(pid: int) -> List[bytes]:
    """/proc/PID/stat's fields from the third (state, ppid, ...: fields[k] is field k + 3);
    OSError where there is none."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()  # the name may hold spaces or ')'


def _reap(pid: int, deadline: float) -> Optional[int]:
    """The child's wait status; None where SIGCHLD is ignored (the kernel reaped it)."""
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                return os.waitpid(pid, 0)[1]
            time.sleep(0.002)
    except ChildProcessError:
        return None


def check_restorable(
    states: Sequence[bytes],
    game: str,
    current: StateBatch,
    procgen_options: Dict[str, Any],
    probe_steps: int = 16,
) -> StateBatch:
    """Validate a batch of blobs meant to replace the states ``current`` (one per env); returns
    their parse. Raises StateDecodeError (naming the state and the reason) or MixedBatchError."""
    batch = check_values(states, game, current)
    trial_restore(game, states, procgen_options, probe_steps)
    return batch


def check_values(states: Sequence[bytes], game: str, current: StateBatch) -> StateBatch:
    """Steps 1-4c of check_restorable (everything but the trial restore); returns the parse."""
    if len(states) != len(current.reward):
        raise UsageError(f"expected {len(current.reward)} states (one per env), got {len(states)}")
    batch = parse_states(states, game=game)
    with np.errstate(invalid="ignore"):  # NaNs are refused below, not warned about
        _check_like(batch, current)
        _check_rngs(states)
        _check_player(batch)
        _check_ranges(batch, game)
        _check_trailer_vectors(batch, game)
    return batch


def trial_restore(
    game: str, states: Sequence[bytes], procgen_options: Dict[str, Any], probe_steps: int = 16
) -> None:
    """Step 5 of check_restorable: the forked set_state, steps and render (StateDecodeError
    field "set_state" if procgen crashes, hangs or fails)."""
    _probe(game, [bytes(s) for s in states], procgen_options, probe_steps)
