"""MirroredLevels: each episode of an EntityVectorEnv played, with probability ``p``, as its mirror
image: augmentation that doubles the levels of a left-right symmetric game (``Game.mirror``).

An env drawn mirrored for an episode shows the agent the observation procgen's builder would give
for the level reflected about the middle of its world, and plays the agent's action reflected
(left and right swapped) in the real level, so the agent lives in the mirrored level for the
whole episode: the real level and the mirrored one are the same game with x -> width - x
(games.Mirror says which games, and why). The observation's mirror, per entity slot that holds
an entity: the ``positions`` features become ``width - value``, the ``negated`` ones change sign;
the class image's columns are reversed (the camera square is centred on the mirror line, and a
square around the player of an odd size on the player's column); the
masks, the types, the padded slots and every other feature are unchanged. The tilemap types'
slots (nearest the camera's centre first, ties in the builder's row order: bottom row first,
then left to right) are ranked again as the builder ranks the mirrored level's, so a slot holds
the same tile it would there. tests/test_mirrored.py checks all of it against procgen playing
the mirrored state itself: the observations match, and so do the next steps' under reflected
actions. Two differences are left, both at ties: entities at exactly the same distance keep the
real level's order, and where a type has more tiles than slots a tie at the last slot is broken
on the real level's side.

The draw is per env per episode (``seed``: its generator); ``mirrored`` says which envs are
mirrored now. With SAME_STEP (SB3) an ended env's terminal observation (``info["final_obs"]``)
is mirrored as its episode was, the first observation of its next episode as the next one is.
Rewards, ends and episode statistics are the real level's, which the mirror does not change.
Off by default: nothing else in the library mirrors.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import gymnasium
import numpy as np
import numpy.typing as npt

from procgen_entities.errors import UsageError
from procgen_entities.games import ACTION_LABELS, Game, Mirror
from procgen_entities.gymnasium.observation import GRID_KEY
from procgen_entities.observation import ObservationSpec

__all__ = ["MIRRORED_ACTIONS", "MirrorTransform", "MirroredLevels"]


def _mirrored_actions(labels: Sequence[str]) -> npt.NDArray[np.int64]:
    """Each action's reflection: left and right swapped in its label (the keys stay)."""
    swap = {"left": "right", "right": "left"}
    out = []
    for label in labels:
        parts = label.split("_")
        out.append(list(labels).index("_".join(swap.get(p, p) for p in parts)))
    return np.array(out, dtype=np.int64)


#: procgen's 15 actions reflected left-right (index: an action, value: its mirror image): its
#: move actions are (vx, vy) = (a // 3 - 1, a % 3 - 1) (basic-abstract-game.cpp:688,
#: set_action_xy), so 0-2 and 6-8 trade places; the special keys 9-14 do not move.
MIRRORED_ACTIONS: npt.NDArray[np.int64] = _mirrored_actions(ACTION_LABELS)


class _TypeMirror:
    """One padded entity type's mirror: the columns to reflect and, for a tilemap type, how
    the builder ranks its slots (nearest the camera centre, then its row order)."""

    def __init__(self, name: str, features: Sequence[str], mirror: Mirror, tile: bool) -> None:
        names = list(features)
        self.name = name
        self.positions = [i for i, f in enumerate(names) if f in mirror.positions]
        self.negated = [i for i, f in enumerate(names) if f in mirror.negated]
        self.rank: Optional[Tuple[int, int, Optional[int], int]] = None
        if tile and "rel_x" in names and "rel_y" in names and "x" in names:
            # the row: y, or rel_y where y is dropped (the same order); a Column has neither
            # (one per x: its rel_y is its height)
            row: Optional[int] = names.index("y") if "y" in names else names.index("rel_y")
            if name == "Column":
                row = None
            self.rank = (names.index("rel_x"), names.index("rel_y"), row, names.index("x"))

    def apply(
        self, rows: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_], width: float
    ) -> None:
        """Reflect ``rows`` [m, cap, F] in place where ``mask`` [m, cap] holds an entity."""
        valid = mask[..., None]
        for col in self.positions:
            rows[..., col] = np.where(mask, np.float32(width) - rows[..., col], rows[..., col])
        for col in self.negated:
            rows[..., col] = np.where(mask, -rows[..., col], rows[..., col])
        if self.rank is not None and rows.shape[1] > 1:
            rows[...] = np.where(valid, self._ranked(rows, mask), rows)

    def _ranked(self, rows: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_]) -> Any:
        """``rows`` in the builder's order for the mirrored level (csrc/padding.c by_distance:
        the squared distance in float32, then the row the tilemap emitted first:
        csrc/tilemap.c emits bottom row first, each row left to right)."""
        assert self.rank is not None
        rx, ry, row, x = self.rank
        distance = rows[..., rx] * rows[..., rx] + rows[..., ry] * rows[..., ry]
        distance = np.where(mask, distance, np.float32(np.inf))
        keys = [rows[..., x]] + ([rows[..., row]] if row is not None else []) + [distance]
        order = np.lexsort(keys, axis=-1)  # the last key sorts first
        return np.take_along_axis(rows, order[..., None], axis=1)


class MirrorTransform:
    """The mirror of an EntityVectorEnv's observations and actions (its dict form), per env:
    ``observation(obs, which)`` and ``actions(actions, which)`` with ``which`` a bool per env.
    ``game``'s ``Game.mirror`` and the env's distribution mode give the mirror line."""

    def __init__(self, game: Game, spec: ObservationSpec, mode: str) -> None:
        mirror = game.mirror
        if mirror is None:
            raise UsageError(f"{game.name} is not declared left-right symmetric (Game.mirror): "
                             "its levels have no mirror image to play")  # fmt: skip
        if mode not in mirror.width:
            raise UsageError(f"{game.name}: no mirror width for distribution mode {mode!r} "
                             f"(declared: {', '.join(mirror.width)})")  # fmt: skip
        self.width = float(mirror.width[mode])
        layout = spec.padded_layout
        if spec.grid_centre == "player" and layout.grid_size % 2 == 0:
            # the player's cell is column (S - 1) // 2: reversed columns put it one to the right
            raise UsageError(f"a grid around the player mirrors only at odd sizes, this one has "
                             f"{layout.grid_size} columns")  # fmt: skip
        if spec.grid_boxes:
            # not checked against procgen's mirrored states (tests/test_mirrored.py) yet
            raise UsageError("mirrored levels do not take grid_boxes yet: mark the cells")
        tiles = set(spec.tiles.names) if spec.tiles is not None else set()
        self._types = [
            _TypeMirror(name, features, mirror, name in tiles)
            for name, features in layout.feature_names().items()
            if name != "global"
        ]

    def observation(
        self, obs: Mapping[str, npt.NDArray[Any]], which: npt.NDArray[np.bool_]
    ) -> Dict[str, npt.NDArray[Any]]:
        """A copy of ``obs`` (the dict form, [n, ...] per key) with the envs in ``which``
        mirrored."""
        out = {key: np.array(value, copy=True) for key, value in obs.items()}
        if not which.any():
            return out
        for kind in self._types:
            rows = out[kind.name][which]
            kind.apply(rows, out[f"{kind.name}_mask"][which], self.width)
            out[kind.name][which] = rows
        if GRID_KEY in out:
            out[GRID_KEY][which] = out[GRID_KEY][which][..., ::-1]
        return out

    @staticmethod
    def actions(actions: npt.ArrayLike, which: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """The actions to play in the real levels: reflected for the envs in ``which``."""
        chosen = np.asarray(actions, dtype=np.int64)
        if chosen.shape != which.shape:
            raise UsageError(f"actions must have shape {which.shape}, got {chosen.shape}")
        if chosen.size and (chosen.min() < 0 or chosen.max() >= len(MIRRORED_ACTIONS)):
            raise UsageError(f"actions must be in [0, {len(MIRRORED_ACTIONS)}), got "
                             f"{chosen.min()}..{chosen.max()}")  # fmt: skip
        return np.where(which, MIRRORED_ACTIONS[chosen], chosen)


class MirroredLevels(gymnasium.vector.VectorWrapper):  # type: ignore[misc]
    """``MirroredLevels(env, p=0.5, seed=0)``: ``env`` an EntityVectorEnv (or a wrapper of one
    with its surface, such as PrioritizedLevels) of a game with ``Game.mirror``; every episode
    of every env is mirrored with probability ``p`` (see the module's docstring)."""

    def __init__(self, env: Any, p: float = 0.5, *, seed: Optional[int] = 0) -> None:
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise UsageError(f"MirroredLevels: p is a probability in [0, 1], got {p!r}")
        entity_env = _entity_env(env)
        mode = str(entity_env.stepper.procgen_options.get("distribution_mode", "hard"))
        self.transform = MirrorTransform(entity_env.game, entity_env.observation_spec, mode)
        super().__init__(env)
        self._wrapped: Any = env  # self.env, with EntityVectorEnv's surface
        self.p = float(p)
        self._flatten = bool(entity_env.flatten)
        self._layout = entity_env.observation_spec.padded_layout
        self._draws = np.random.default_rng(seed)
        self._mirrored = np.zeros(env.num_envs, dtype=np.bool_)
        self._pending = np.zeros(env.num_envs, dtype=np.bool_)  # NEXT_STEP: ended last step
        self._started = False

    # ---- what SB3VecEnv and the tools read of an EntityVectorEnv ----

    @property
    def autoreset_mode(self) -> Any:
        return self._wrapped.autoreset_mode

    @property
    def engine(self) -> str:
        return str(self._wrapped.engine)

    @property
    def stats_key(self) -> str:
        return str(self._wrapped.stats_key)

    @property
    def mirrored(self) -> npt.NDArray[np.bool_]:
        """Which envs play their current episode mirrored."""
        return self._mirrored.copy()

    # ---- Gymnasium ----

    def reset(
        self, *, seed: Union[int, List[int], None] = None, options: Optional[Dict[str, Any]] = None
    ) -> Tuple[Any, Dict[str, Any]]:
        """The env's reset; every env's episode is drawn afresh (with ``options={"reset_mask":
        mask}`` only the masked envs')."""
        obs, info = self._wrapped.reset(seed=seed, options=options)
        mask = (options or {}).get("reset_mask")
        fresh = np.ones(self.num_envs, dtype=np.bool_) if mask is None else np.asarray(mask)
        self._draw(fresh)
        self._pending &= ~fresh
        self._started = True
        return self._observe(obs), info

    def step(self, actions: Any) -> Tuple[Any, Any, Any, Any, Dict[str, Any]]:
        if not self._started:
            raise UsageError("MirroredLevels: reset() first")
        self._draw(self._pending)  # NEXT_STEP: the envs that ended last step start one now
        self._pending[:] = False
        played = self.transform.actions(actions, self._mirrored)
        obs, reward, terminated, truncated, info = self.env.step(played)
        ended = np.asarray(terminated) | np.asarray(truncated)
        if "final_obs" in info:  # SAME_STEP: the ended episodes' last observations, as played
            info["final_obs"] = self._final(info["final_obs"], ended)
        if self.autoreset_mode == gymnasium.vector.AutoresetMode.SAME_STEP:
            self._draw(ended)  # obs already holds their next episodes' first observations
        else:
            self._pending = ended.copy()  # obs holds their terminal observations
        return self._observe(obs), reward, terminated, truncated, info

    def __enter__(self) -> "MirroredLevels":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the mirror ----

    def _draw(self, envs: npt.NDArray[np.bool_]) -> None:
        """New draws for the episodes of ``envs`` (one number per env either way, so the draws
        do not depend on which envs ended)."""
        draws = self._draws.random(self.num_envs) < self.p
        self._mirrored = np.where(envs, draws, self._mirrored)

    def _observe(self, obs: Any) -> Any:
        if not self._mirrored.any():
            return obs
        if self._flatten:
            mirrored = self.transform.observation(self._layout.unflatten(obs), self._mirrored)
            return self._layout.flatten(mirrored)
        return self.transform.observation(obs, self._mirrored)

    def _final(self, final: npt.NDArray[Any], ended: npt.NDArray[np.bool_]) -> npt.NDArray[Any]:
        """``info["final_obs"]`` (one per env, None where not ended) mirrored as played."""
        out = final.copy()
        one = np.ones(1, dtype=np.bool_)
        for i in np.flatnonzero(ended & self._mirrored):
            if self._flatten:
                batch = self._layout.unflatten(np.asarray(final[i])[None])
                out[i] = self._layout.flatten(self.transform.observation(batch, one))[0]
            else:
                batch = {key: np.asarray(value)[None] for key, value in final[i].items()}
                mirrored = self.transform.observation(batch, one)
                out[i] = {key: value[0] for key, value in mirrored.items()}
        return out


def _entity_env(env: Any) -> Any:
    """The EntityVectorEnv at the bottom of ``env``'s wrappers (UsageError: none)."""
    from procgen_entities.gymnasium.vector import EntityVectorEnv

    inner = env
    while not isinstance(inner, EntityVectorEnv):
        inner = getattr(inner, "env", None)
        if inner is None:
            raise UsageError(f"MirroredLevels wraps an EntityVectorEnv, not {type(env).__name__}")
    return inner
