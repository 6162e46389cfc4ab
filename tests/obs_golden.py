"""Golden ProcgenVecEnv observations (tests/data/observations/<game>.npz): recording and reading.

Recorded from real procgen by ``tools/record_obs_golden.py`` (see there); the test
(tests/test_obs_golden.py) replays the same rollouts and demands the same bytes. Each game runs
a few observation configurations (``CONFIGS``), each a fresh ProcgenVecEnv of ``ENVS`` envs with
the game's seed: ``warmup`` steps of the fixed random actions (chosen at recording so that the
recorded window holds an episode end; their reward and done are kept too), then reset's
observation and ``WINDOW`` recorded steps. What is kept per recorded step: every entity type's
features (flattened, with its width) and lengths, the global entity, the order of the types, the
actors of the action mask, reward, done and the metrics; and the full ObsSpace.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

OBS_DIR = Path(__file__).resolve().parent / "data" / "observations"
ENVS = 3
WINDOW = 30
#: How far recording looks for the first episode end (procgen's longest timeout is 1000).
MAX_WARMUP = 1100
#: Steps recorded before the first episode end, when there are that many.
LEAD = 5
#: The tilemap of games that have tiles but no training tilemap (every mode gets covered).
OTHER_TILEMAPS = {
    "caveflyer": "chunks",
    "chaser": "tiles",
    "heist": "runs",
    "jumper": "runs",
    "leaper": "tiles",
    "maze": "chunks",
    "miner": "tiles",
}


@dataclass(frozen=True)
class Config:
    """One rollout: ProcgenVecEnv keywords, and whether it asks for a filtered observation
    (every other step) and restores its own states at the end."""

    kwargs: Mapping[str, Any] = field(default_factory=dict)
    filtered: bool = False
    restore: bool = False


def tilemap_of(game: str) -> Optional[str]:
    from procgen_entities.games import get_game

    return get_game(game).training_tilemap or OTHER_TILEMAPS.get(game)


def configs(game: str) -> Dict[str, Config]:
    tilemap = tilemap_of(game)
    tiles: Dict[str, Any] = {"tilemap": tilemap} if tilemap else {}
    training = {"relative_positions": True, **tiles}
    return {
        "default": Config(restore=True),
        "training": Config(training),
        "filter": Config(training, filtered=True),
        "wide": Config({"entity_window": False, "actor": "player", "defer_reset": True}),
        "get_state": Config({**training, "engine": "get_state"}),
    }


def seed_of(game: str) -> int:
    return zlib.crc32(f"obs-golden/{game}".encode()) % 100_000


def subset(game: str, space: Any) -> Any:
    """A filter of the full ObsSpace: fewer globals in another order; a tile type first (its
    features past the first), then the Player's features reversed, every other type's first
    feature and its last ones reversed."""
    from entity_gym.env import Entity, ObsSpace

    from procgen_entities.games import get_game

    game_types = set(get_game(game).entity_types.values())
    globals_ = list(space.global_features)[::-1][: max(1, len(space.global_features) - 1)]
    entities: Dict[str, Any] = {}
    tile_types = [name for name in space.entities if name not in game_types]
    if tile_types:
        entities[tile_types[0]] = Entity(list(space.entities[tile_types[0]].features)[1:])
    entities["Player"] = Entity(list(space.entities["Player"].features)[::-1])
    others = [name for name in space.entities if name in game_types and name != "Player"]
    for name in others[::2]:
        features = list(space.entities[name].features)
        entities[name] = Entity([features[0], *features[:0:-1][:3]])
    return ObsSpace(global_features=globals_, entities=entities)


def actions_of(game: str, steps: int) -> np.ndarray:
    return np.random.default_rng(seed_of(game)).integers(0, 15, (steps, ENVS)).astype(np.int64)


def _act(env: Any, chosen: np.ndarray, space: Any) -> Any:
    from ragged_buffer import RaggedBufferI64

    ones = np.ones(ENVS, dtype=np.int64)
    return env.act({"move": RaggedBufferI64.from_flattened(chosen.reshape(-1, 1), ones)}, space)


def make_env(game: str, config: Config) -> Any:
    from procgen_entities.entity_gym.vec_env import ProcgenVecEnv

    return ProcgenVecEnv(game, ENVS, seed=seed_of(game), **config.kwargs)


def find_warmup(game: str, config: Config) -> int:
    """Steps before the recorded window: LEAD steps before the first episode end."""
    actions = actions_of(game, MAX_WARMUP)
    with make_env(game, config) as env:
        space = env.obs_space()
        env.reset(space)
        for t in range(MAX_WARMUP):
            if _act(env, actions[t], space).done.any():
                return max(0, t - LEAD)
    raise AssertionError(f"{game}: no episode ended in {MAX_WARMUP} steps")


class _Recorder:
    """The observations of one rollout, as the npz arrays of one config."""

    def __init__(self) -> None:
        self.steps: List[Any] = []

    def add(self, obs: Any) -> None:
        self.steps.append(obs)

    def arrays(self, prefix: str) -> Dict[str, np.ndarray]:
        out: Dict[str, np.ndarray] = {}
        names = list(dict.fromkeys(n for obs in self.steps for n in obs.features))
        t_count = len(self.steps)
        for name in names:
            data, lengths = [], np.full((t_count, ENVS), -1, dtype=np.int64)
            widths = np.full(t_count, -1, dtype=np.int64)
            for t, obs in enumerate(self.steps):
                buf = obs.features.get(name)
                if buf is None:
                    continue
                rows = buf.as_array()
                assert rows.dtype == np.float32
                data.append(rows.ravel())
                lengths[t] = np.asarray(buf.size1(), dtype=np.int64)
                widths[t] = buf.size2()
            out[f"{prefix}/{name}/data"] = np.concatenate(data).astype(np.float32, copy=False)
            out[f"{prefix}/{name}/lengths"] = lengths
            out[f"{prefix}/{name}/width"] = widths
        out[f"{prefix}/order"] = np.array([",".join(obs.features) for obs in self.steps])
        out[f"{prefix}/reward"] = np.stack([obs.reward for obs in self.steps])
        out[f"{prefix}/done"] = np.stack([obs.done for obs in self.steps])
        out[f"{prefix}/actors"] = np.stack([_actors(obs) for obs in self.steps])
        out[f"{prefix}/visible"] = np.array([len(obs.visible) for obs in self.steps])
        out[f"{prefix}/metrics"] = np.stack([_metrics(obs) for obs in self.steps])
        return out


def _actors(obs: Any) -> np.ndarray:
    (name,) = obs.action_masks
    mask = obs.action_masks[name]
    assert name == "move" and mask.mask is None
    assert list(mask.actors.size1()) == [1] * ENVS
    return np.asarray(mask.actors.as_array(), dtype=np.int64).reshape(-1)


def _metrics(obs: Any) -> np.ndarray:
    """(present, count, sum, min, max) of the level_complete metric."""
    assert set(obs.metrics) <= {"level_complete"}
    metric = obs.metrics.get("level_complete")
    if metric is None:
        return np.array([0, 0, np.nan, np.nan, np.nan])
    return np.array([1, metric.count, metric.sum, metric.min, metric.max], dtype=np.float64)


def rollout(game: str, name: str, config: Config, warmup: int) -> Dict[str, np.ndarray]:
    """The arrays of one config: ``warmup`` steps (reward and done kept), reset's observation,
    WINDOW steps (filtered on even steps when the config says so), set_states' observation."""
    actions = actions_of(game, warmup + WINDOW)
    recorder = _Recorder()
    prefix = name
    with make_env(game, config) as env:
        space = env.obs_space()
        small = subset(game, space) if config.filtered else space
        recorder.add(env.reset(space))
        warm_reward = np.zeros((warmup, ENVS), dtype=np.float32)
        warm_done = np.zeros((warmup, ENVS), dtype=np.bool_)
        for t in range(warmup):
            obs = _act(env, actions[t], space)
            warm_reward[t], warm_done[t] = obs.reward, obs.done
        for t in range(warmup, warmup + WINDOW):
            recorder.add(_act(env, actions[t], small if t % 2 == 0 else space))
        if config.restore:
            recorder.add(env.set_states(env.get_states()))
        pinned = {
            "global": list(space.global_features),
            **{name: list(e.features) for name, e in space.entities.items()},
        }
    out = recorder.arrays(prefix)
    out[f"{prefix}/space"] = np.array(json.dumps(pinned))
    out[f"{prefix}/warmup"] = np.array(warmup, dtype=np.int64)
    out[f"{prefix}/warm_reward"] = warm_reward
    out[f"{prefix}/warm_done"] = warm_done
    return out


def record(game: str) -> Dict[str, np.ndarray]:
    out: Dict[str, np.ndarray] = {"game": np.array(game), "seed": np.array(seed_of(game))}
    for name, config in configs(game).items():
        out.update(rollout(game, name, config, find_warmup(game, config)))
    return out


def golden_path(game: str) -> Path:
    return OBS_DIR / f"{game}.npz"


def load(game: str) -> Dict[str, np.ndarray]:
    with np.load(golden_path(game), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def differences(expected: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray]) -> List[str]:
    """Keys whose arrays differ in dtype, shape or bytes (missing keys included)."""
    found = [f"missing {k}" for k in expected if k not in got]
    found += [f"extra {k}" for k in got if k not in expected]
    for key in expected:
        if key not in got:
            continue
        a, b = expected[key], got[key]
        if a.dtype != b.dtype or a.shape != b.shape:
            found.append(f"{key}: {a.dtype}{a.shape} != {b.dtype}{b.shape}")
        elif a.tobytes() != b.tobytes():
            found.append(f"{key}: {_first_difference(a, b)}")
    return found


def _first_difference(a: np.ndarray, b: np.ndarray) -> str:
    if a.dtype.kind in "US":
        at = int(np.flatnonzero(a.ravel() != b.ravel())[0])
    else:
        raw_a = a.view(np.uint8).reshape(a.size, -1) if a.size else a
        raw_b = b.view(np.uint8).reshape(b.size, -1) if b.size else b
        at = int(np.flatnonzero((raw_a != raw_b).any(axis=1))[0])
    return f"first at flat index {at}: {a.ravel()[at]!r} != {b.ravel()[at]!r}"


def split(arrays: Mapping[str, np.ndarray]) -> Dict[str, Dict[str, np.ndarray]]:
    """The arrays of each config by key (without the config's prefix)."""
    out: Dict[str, Dict[str, np.ndarray]] = {}
    for key, value in arrays.items():
        if "/" in key:
            prefix, rest = key.split("/", 1)
            out.setdefault(prefix, {})[rest] = value
    return out


def summary(arrays: Mapping[str, np.ndarray]) -> Tuple[int, int]:
    """(episode ends in the recorded windows, entity rows recorded) over every config."""
    ends = rows = 0
    for config in split(arrays).values():
        ends += int(config["done"].sum())
        rows += sum(int(v[v > 0].sum()) for k, v in config.items() if k.endswith("/lengths"))
    return ends, rows
