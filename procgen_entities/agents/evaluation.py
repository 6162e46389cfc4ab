"""Agents run for one episode per level, next to baselines on the same levels: the episodes and
how they ended (``death_cause``: each of the game's hazards as the terminal state shows it,
``HAZARD_RULES``), the first levels of an evaluation seed (procgen's own sampling), saved level
files played in the env their state fits (``run_levels``), and the baselines: uniformly random
actions, every constant action, and for coinrun and bigfish a scripted hazard-aware rule
(``SCRIPTED``).

The library of ``python -m procgen_entities.evaluate`` (procgen_entities/tools/evaluate.py,
which prints and records these); the policies are checkpoint.py's ``load_policy`` or any
callable from the observation to actions.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

from procgen_entities.agents.checkpoint import EnvConfig, make_env
from procgen_entities.errors import UsageError
from procgen_entities.features import ACTION_LABELS, feature_space
from procgen_entities.games import Game, get_game
from procgen_entities.level_files import ALL_LEVELS_HIGH, Level, env_options
from procgen_entities.procgen_envs import group_seeds
from procgen_entities.stepper import default_num_groups, group_sizes

__all__ = [
    "BatchedPolicy", "DEFAULT_BATCH", "EVAL_SEED", "Episodes", "HAZARD_RULES", "Policy",
    "RandomActions", "SCRIPTED", "baselines", "death_cause", "first_level_seeds",
    "observation_form", "run_episodes", "run_levels", "scripted_bigfish", "scripted_coinrun",
]  # fmt: skip

EVAL_SEED = 1_000_003  # the training tools never seed their envs with it
#: Envs an evaluation runs at once (--batch); more episodes run in batches of this many.
DEFAULT_BATCH = 256
Policy = Callable[[Any], np.ndarray]


@dataclass
class Episodes:
    """The first episode of every env: success, return, length and how it ended."""

    complete: np.ndarray
    returns: np.ndarray
    lengths: np.ndarray
    causes: List[str] = field(default_factory=list)

    def summary(self) -> Dict[str, Any]:
        n = len(self.complete)
        rate = float(self.complete.mean())
        spread = float(self.returns.std(ddof=1)) if n > 1 else 0.0
        ends = {c: self.causes.count(c) for c in dict.fromkeys(sorted(self.causes))}
        return {
            "episodes": n, "completion": rate,
            "completion_ci95": 1.96 * math.sqrt(max(rate * (1 - rate), 1e-12) / n),
            "return": float(self.returns.mean()), "return_ci95": 1.96 * spread / math.sqrt(n),
            "length": float(self.lengths.mean()), "ends": ends,
        }  # fmt: skip


def _overlaps(player: np.ndarray, others: np.ndarray, fields: Mapping[str, int]) -> bool:
    x, y, rx, ry = (fields[f] for f in ("x", "y", "rx", "ry"))
    dx = np.abs(others[:, x] - player[x]) < np.abs(others[:, rx]) + abs(player[rx])
    dy = np.abs(others[:, y] - player[y]) < np.abs(others[:, ry]) + abs(player[ry])
    return bool((dx & dy).any())


def _touches_tile(player: np.ndarray, grid: np.ndarray, tiles: tuple, fields: Mapping) -> bool:
    x, y, rx, ry = (float(player[fields[f]]) for f in ("x", "y", "rx", "ry"))
    h, w = grid.shape
    cols = range(max(0, math.floor(x - rx)), min(w, math.floor(x + rx) + 1))
    rows = range(max(0, math.floor(y - ry)), min(h, math.floor(y + ry) + 1))
    return any(int(grid[r, c]) in tiles for r in rows for c in cols)


def _of_type(game: Game, rows: np.ndarray, fields: Mapping[str, int], name: str) -> np.ndarray:
    ids = [tid for tid, type_name in game.entity_types.items() if type_name == name]
    return rows[np.isin(rows[:, fields["type"]].astype(int), ids)]


def _larger_fish(game: Game, hazard: str, player: np.ndarray, rows: np.ndarray,
                 grid: Optional[np.ndarray], fields: Mapping[str, int]) -> bool:  # fmt: skip
    """bigfish.cpp:45-58: a fish ends the episode only when its rx is larger than the
    player's; a smaller one it touches is eaten (erased that step)."""
    fish = _of_type(game, rows, fields, hazard)
    larger = np.abs(fish[:, fields["rx"]]) > abs(player[fields["rx"]])
    return _overlaps(player, fish[larger], fields)


def _drowned(game: Game, hazard: str, player: np.ndarray, rows: np.ndarray,
             grid: Optional[np.ndarray], fields: Mapping[str, int]) -> bool:  # fmt: skip
    """leaper.cpp:259-274: the player drowns when it is at rest, the cell under its centre is
    water and no log holds it (has_collision with margin -rx: |dx| < log rx and |dy| < player
    ry + log ry - player rx). Touching water is no death: a player on a log touches it."""
    x, y, rx, ry, vx, vy = (float(player[fields[f]]) for f in ("x", "y", "rx", "ry", "vx", "vy"))
    col, row = math.floor(x), math.floor(y)
    if grid is None or vx != 0 or vy != 0 or not (0 <= row < grid.shape[0]
                                                  and 0 <= col < grid.shape[1]):  # fmt: skip
        return False
    if int(grid[row, col]) not in game.tiles[hazard]:
        return False
    logs = _of_type(game, rows, fields, "Log")
    held = np.abs(logs[:, fields["x"]] - x) < np.abs(logs[:, fields["rx"]])
    held &= np.abs(logs[:, fields["y"]] - y) < ry + np.abs(logs[:, fields["ry"]]) - rx
    return not held.any()


def _falls_on(game: Game, hazard: str, player: np.ndarray, rows: np.ndarray,
              grid: Optional[np.ndarray], fields: Mapping[str, int]) -> bool:  # fmt: skip
    """miner.cpp:271-292: a boulder or diamond still falling (its moving tile) into the
    player's cell from the one above ends the episode, and stays in that cell; the player's
    box also touches the cells to its right, where a falling rock does nothing."""
    col = math.floor(float(player[fields["x"]]))
    row = math.floor(float(player[fields["y"]])) + 1  # procgen's y grows upwards
    if grid is None or not (0 <= row < grid.shape[0] and 0 <= col < grid.shape[1]):
        return False
    return int(grid[row, col]) in game.tiles[hazard]


#: Hazards whose end is not the player's box touching them in the terminal state (the test of
#: every other hazard: entities' boxes, or the cells under the player's box as procgen's
#: check_grid_collisions reads them): (game, hazard) -> procgen's own condition.
HAZARD_RULES: Dict[Tuple[str, str], Callable[..., bool]] = {
    ("bigfish", "Fish"): _larger_fish,
    ("leaper", "Water"): _drowned,
    ("miner", "MovingBoulder"): _falls_on,
    ("miner", "MovingDiamond"): _falls_on,
}


def death_cause(game: Game, batch: Any, i: int) -> str:
    """Which of the game's hazards ended terminal state ``i`` of a StateBatch (the first in
    declaration order): the player touches it there, or for HAZARD_RULES that rule holds; or
    "other": an end that is no hazard (plunder's juice running out; leaper's log carrying the
    player out of the world; a game without hazards has only complete and timeout), or a
    hazard procgen erased in the step it ended the episode (starpilot's ship that the player's
    shots destroyed the step before, dodgeball's enemy its ball destroyed, bossfight's bullet
    that a barrier also stopped, ninja's explosion in its last step)."""
    names = ("x", "y", "rx", "ry", "vx", "vy", "type")
    fields = {name: batch.entity_fields.index(name) for name in names}
    rows = batch.state_entities(i)
    player = rows[0]
    types = rows[:, fields["type"]].astype(int)
    ids = {name: tid for tid, name in game.entity_types.items()}
    grid = None if batch.grid is None else batch.grid[i]
    for hazard in game.hazards:
        rule = HAZARD_RULES.get((game.name, hazard))
        if rule is not None:
            if rule(game, hazard, player, rows, grid, fields):
                return hazard.lower()
        elif hazard in ids:
            if _overlaps(player, rows[types == ids[hazard]], fields):
                return hazard.lower()
        elif grid is not None and _touches_tile(player, grid, game.tiles[hazard], fields):
            return hazard.lower()
    return "other"


def observation_form(policy: Any, flatten: Optional[bool]) -> bool:
    """The ``flatten`` to build the env with: a policy that declares its form (load_policy's
    ``CheckpointPolicy.flatten``) gets it, and a contradicting ``flatten`` is a UsageError
    rather than a shape error deep in the policy; any other policy gets ``flatten`` (None: the
    flat form, the default of make_env)."""
    wants = getattr(policy, "flatten", None)
    if not isinstance(wants, bool):
        return True if flatten is None else bool(flatten)
    if flatten is not None and bool(flatten) != wants:
        form = "flat" if wants else "dict"
        raise UsageError(f"the policy reads the {form} observation (flatten={wants}), "
                         f"but flatten={flatten} was passed")  # fmt: skip
    return wants


def run_episodes(
    config: EnvConfig,
    policy: Union[Policy, "BatchedPolicy"],
    episodes: int,
    seed: int,
    *,
    flatten: Optional[bool] = None,
    progress: Optional[Any] = None,
    batch: int = DEFAULT_BATCH,
) -> Episodes:
    """``policy`` (a batch of observations -> actions) for one episode in each of ``episodes``
    envs seeded with ``seed``: the same levels for every policy with the same seed.
    ``flatten``: the observation form (see observation_form; None: the policy's own).
    ``progress``: a tqdm bar, advanced by every finished episode. At most ``batch`` envs run at
    once; a larger evaluation plays the same levels in batches (each env started on the level
    the ``episodes``-env vec env would give it, see _start_states). A ``BatchedPolicy`` gets
    the indices of each batch; any other policy sees batches of observations."""
    if batch < 1:
        raise UsageError(f"batch must be >= 1, got {batch}")
    flatten = observation_form(policy, flatten)
    if episodes <= batch:
        # consecutive group seeds: the levels every recorded evaluation was measured on
        env = make_env(config, episodes, seed, flatten=flatten, autoreset_mode="NextStep",
                       group_seeding="consecutive")  # fmt: skip
        obs, _ = env.reset(seed=seed)
        act = policy.part(0, episodes) if isinstance(policy, BatchedPolicy) else policy
        return _first_episodes(env, get_game(config.game), act, obs, progress)
    levels, span = first_level_seeds(config, episodes, seed), _level_range(config)
    parts = []
    for start in range(0, episodes, batch):
        stop = min(start + batch, episodes)
        env = make_env(config, stop - start, seed, flatten=flatten, autoreset_mode="NextStep")
        obs, _ = env.reset(options={"states": _start_states(env, levels[start:stop], *span)})
        act = policy.part(start, stop) if isinstance(policy, BatchedPolicy) else policy
        parts.append(_first_episodes(env, get_game(config.game), act, obs, progress))
    return Episodes(
        np.concatenate([p.complete for p in parts]), np.concatenate([p.returns for p in parts]),
        np.concatenate([p.lengths for p in parts]), [c for p in parts for c in p.causes],
    )  # fmt: skip


class BatchedPolicy:
    """A policy whose actions depend on the env's index in the evaluation (not only on its
    observation): ``part(start, stop)`` is the policy of envs ``start..stop-1``."""

    def part(self, start: int, stop: int) -> Policy:
        raise NotImplementedError


class RandomActions(BatchedPolicy):
    """Uniform random actions, drawn for all ``episodes`` envs at every step from one generator
    seeded ``seed``: a batch replays the draws and keeps its own columns, so its envs get the
    actions they get when every env runs at once (the recorded random baselines)."""

    def __init__(self, seed: int, actions: int, episodes: int) -> None:
        self.seed, self.actions, self.episodes = seed, actions, episodes

    def part(self, start: int, stop: int) -> Policy:
        rng = np.random.default_rng(self.seed)
        return lambda obs: rng.integers(0, self.actions, self.episodes)[start:stop]


def _mt19937(seed: int, count: int) -> npt.NDArray[np.uint32]:
    """The first ``count`` outputs of ``std::mt19937(seed)``, procgen's RandGen (randgen.cpp:
    RandGen::seed, RandGen::randint() returns one output). numpy's legacy RandomState seeds an
    integer the same way (init_genrand) and draws a full-range uint32 as one output."""
    state = np.random.RandomState(seed % 2**32)
    return state.randint(0, 2**32, size=count, dtype=np.uint32)


def first_level_seeds(config: EnvConfig, episodes: int, seed: int) -> List[int]:
    """The level each env of run_episodes' ``episodes``-env vec env starts on. Its procgen
    group g is seeded ``seed + g`` (group_seeding="consecutive"; 2 groups from 8 envs, as the
    stepper splits them); game k of a group seeds its level_seed_rand_gen with output k of
    mt19937(group seed) (vecgame.cpp: VecGame::VecGame), and its first reset draws
    ``low + output 0 % (high - low)`` from it (game.cpp: Game::reset, randgen.cpp:
    RandGen::randint(low, high))."""
    low, high = _level_range(config)
    groups = default_num_groups(episodes)
    seeds = group_seeds(seed, groups, "consecutive")
    levels: List[int] = []
    for group_seed, size in zip(seeds, group_sizes(episodes, groups)):
        for game_seed in _mt19937(group_seed, size):
            levels.append(low + int(_mt19937(int(game_seed), 1)[0]) % (high - low))
    return levels


def _level_range(config: EnvConfig) -> Tuple[int, int]:
    """procgen's level_seed_low/high of the config (vecgame.cpp: VecGame::VecGame)."""
    if config.num_levels == 0:
        return 0, ALL_LEVELS_HIGH
    return config.start_level, config.start_level + config.num_levels


def _start_states(env: Any, levels: Sequence[int], low: int, high: int) -> List[bytes]:
    """get_state blobs of fresh games on ``levels``, one per env of ``env``. Games of the env's
    procgen options get level range [L, L+1) and a forced reset (action -1, game.cpp:
    Game::step), which seeds rand_gen with L alone and generates level L as a fresh game does
    (tests/test_evaluate_batches.py compares them); then the env's own range goes back in.
    Left over from the forced step, and overwritten by the next step: prev_level_seed,
    episode_done, move_action, step_rand_int, and the level_seed_rand_gen (so later episodes
    of the env, never counted, play other levels than they would). ``low``, ``high``: the
    env's own level range."""
    from procgen_entities.procgen_envs import make_procgen_env

    stepper = env.stepper
    game = stepper.game.name
    offset = 60 + len(game)  # level_seed_low, level_seed_high (docs/state-format.md)
    procgen = make_procgen_env(game, len(levels), rand_seed=0, **stepper.procgen_options)
    try:
        one_level = [(level, level + 1) for level in levels]
        procgen.set_state(_with_level_ranges(procgen.get_state(), offset, one_level))
        procgen.act(np.full(len(levels), -1, dtype=np.int32))
        procgen.wait()
        return _with_level_ranges(procgen.get_state(), offset, [(low, high)] * len(levels))
    finally:
        procgen.close()


def _with_level_ranges(
    blobs: Sequence[bytes], offset: int, ranges: Sequence[Tuple[int, int]]
) -> List[bytes]:
    """``blobs`` with level_seed_low/high (at byte ``offset``) set to each one's range."""
    patched = []
    for blob, (low, high) in zip(blobs, ranges):
        data = bytearray(blob)
        struct.pack_into("<ii", data, offset, low, high)
        patched.append(bytes(data))
    return patched


def _first_episodes(
    env: Any, game: Game, policy: Policy, obs: Any, progress: Optional[Any]
) -> Episodes:
    """Step ``env`` (NEXT_STEP resets, from observation ``obs``) until every env's episode has
    ended; closes it."""
    episodes = env.num_envs
    finished = np.zeros(episodes, dtype=bool)
    result = Episodes(np.zeros(episodes, bool), np.zeros(episodes), np.zeros(episodes, np.int64))
    causes = [""] * episodes
    while not finished.all():
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        live = ~finished
        result.returns[live] += reward[live]
        result.lengths[live] += 1
        ended = (terminated | truncated) & live
        if not ended.any():
            continue
        result.complete[ended] = info["prev_level_complete"][ended]
        indices, terminal = env.stepper.final_states()
        for k, i in enumerate(indices):
            if not ended[i]:
                continue
            if result.complete[i]:
                causes[i] = "complete"
            elif truncated[i]:
                causes[i] = "timeout"
            else:
                causes[i] = death_cause(game, terminal, k)
        finished |= ended
        if progress is not None:
            progress.update(int(ended.sum()))
    env.close()
    result.causes = causes
    return result


def scripted_coinrun(feature_names: Mapping[str, tuple]) -> Policy:
    """Right+jump, except walk right while the nearest hazard entity ahead (coinrun's saws and
    enemies, ``Game.hazards``; within 2 tiles of height) is 3.5-8 tiles away, so the jump starts
    close enough to clear it; a walk that is blocked (the player not moving right) jumps."""
    game = get_game("coinrun")
    hazards = [name for name in game.hazards if name in game.entity_types.values()]
    rel_x = feature_names[hazards[0]].index("rel_x")
    rel_y = feature_names[hazards[0]].index("rel_y")
    vx = feature_names["Player"].index("vx")
    right, right_up = ACTION_LABELS.index("right"), ACTION_LABELS.index("right_up")

    def policy(obs: Mapping[str, np.ndarray]) -> np.ndarray:
        nearest = np.full(len(obs["global"]), np.inf)
        for name in hazards:
            ahead = obs[f"{name}_mask"] & (obs[name][..., rel_x] > 0)
            ahead &= np.abs(obs[name][..., rel_y]) < 2
            distance = np.where(ahead, obs[name][..., rel_x], np.inf).min(axis=1)
            nearest = np.minimum(nearest, distance)
        moving = obs["Player"][:, 0, vx] > 0.05
        return np.where((nearest > 3.5) & (nearest < 8) & moving, right, right_up)

    return policy


def _move(dx: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """The action of each (dx, dy) in {-1, 0, 1}^2 (procgen/env.py get_combos: action
    3 * (dx + 1) + (dy + 1), y upwards)."""
    return (3 * (dx + 1) + (dy + 1)).astype(np.int64)


def scripted_bigfish(feature_names: Mapping[str, tuple]) -> Policy:
    """Flee the larger fish (the deadly ones, ``_larger_fish``), chase the smaller: the move is
    the sign of the sum of a push away from every larger fish within 3 units of the player's
    box (weight 1 / gap^2) and a pull toward every smaller one (weight 3 / (distance + 1)), each
    fish taken where it will be in 3 steps (fish swim straight across, bigfish.cpp:81-93); a
    component under 0.38 of the sum's length is no move on that axis."""
    fish, player = feature_names["Fish"], feature_names["Player"]
    rel_x, rel_y = fish.index("rel_x"), fish.index("rel_y")
    fish_vx, fish_rx, player_rx = fish.index("vx"), fish.index("rx"), player.index("rx")

    def policy(obs: Mapping[str, np.ndarray]) -> np.ndarray:
        seen, rows = obs["Fish_mask"], obs["Fish"]
        mine = obs["Player"][:, 0, player_rx][:, None]
        dx = rows[..., rel_x] + 3 * rows[..., fish_vx]
        dy = rows[..., rel_y]
        dist = np.sqrt(dx * dx + dy * dy) + 1e-6
        gap = np.maximum(np.maximum(np.abs(dx), np.abs(dy)) - rows[..., fish_rx] - mine, 0.05)
        larger = seen & (rows[..., fish_rx] > mine)
        weight = np.where(larger & (gap < 3), -1 / gap**2, 0.0)
        weight += np.where(seen & ~larger, 3 / (dist + 1), 0.0)
        fx, fy = (weight * dx / dist).sum(axis=1), (weight * dy / dist).sum(axis=1)
        norm = np.sqrt(fx * fx + fy * fy)
        scale = np.where(norm > 1e-6, 1 / np.maximum(norm, 1e-6), 0.0)
        return _move(np.round(fx * scale / 0.76), np.round(fy * scale / 0.76))

    return policy


def run_levels(
    config: EnvConfig,
    policy: Policy,
    levels: List[Level],
    seed: int,
    *,
    flatten: Optional[bool] = None,
    progress: Optional[Any] = None,
    batch: int = DEFAULT_BATCH,
) -> Episodes:
    """One episode of ``policy`` from each of ``levels`` (validated), in the observation form
    ``flatten`` (see observation_form; None: the policy's own); up to ``batch`` levels of the
    same procgen options share one env, restored with reset(options={"states": ...}) (the
    states hold their RNGs: any batch size plays the same episodes)."""
    if batch < 1:
        raise UsageError(f"batch must be >= 1, got {batch}")
    flatten = observation_form(policy, flatten)
    groups: Dict[Tuple[Any, ...], List[int]] = {}
    for i, level in enumerate(levels):
        groups.setdefault(tuple(sorted(env_options(level.state).items())), []).append(i)
    n = len(levels)
    result = Episodes(np.zeros(n, bool), np.zeros(n), np.zeros(n, np.int64), [""] * n)
    batches = [(options, indices[k : k + batch]) for options, indices in groups.items()
               for k in range(0, len(indices), batch)]  # fmt: skip
    for options, indices in batches:
        env = make_env(config, len(indices), seed, flatten=flatten, autoreset_mode="NextStep",
                       **dict(options))  # fmt: skip
        obs, _ = env.reset(options={"states": [levels[i].blob for i in indices]})
        part = _first_episodes(env, get_game(config.game), policy, obs, progress)
        for k, i in enumerate(indices):
            result.complete[i], result.returns[i] = part.complete[k], part.returns[k]
            result.lengths[i], result.causes[i] = part.lengths[k], part.causes[k]
    return result


#: Scripted baselines per game (a function of the dict observation's feature names).
SCRIPTED: Dict[str, Callable[[Mapping[str, tuple]], Policy]] = {
    "bigfish": scripted_bigfish,
    "coinrun": scripted_coinrun,
}


def _constant(action: int) -> Policy:
    return lambda obs: np.full(len(obs["global"]), action)


def baselines(
    config: EnvConfig,
    episodes: int,
    seed: int,
    progress: Optional[Any] = None,
    batch: int = DEFAULT_BATCH,
) -> Dict[str, Episodes]:
    """Random, the best constant action, and the game's scripted rule, on the same levels."""
    n = len(ACTION_LABELS)

    def run(policy: Union[Policy, BatchedPolicy]) -> Episodes:
        return run_episodes(config, policy, episodes, seed, flatten=False, progress=progress,
                            batch=batch)  # fmt: skip

    results = {"random": run(RandomActions(seed, n, episodes))}
    constants = {a: run(_constant(a)) for a in range(n)}
    best = max(constants, key=lambda a: (constants[a].complete.mean(), constants[a].returns.mean()))
    results[f"constant {ACTION_LABELS[best]} (best of {n})"] = constants[best]
    if config.game in SCRIPTED:
        space = feature_space(config.game, relative_positions=True)  # the env's entity features
        names = {name: tuple(e.features) for name, e in space.entities.items()}
        results["scripted"] = run(SCRIPTED[config.game](names))
    return results
