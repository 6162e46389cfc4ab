"""Random edits of real states through State: each is refused with a typed error, or accepted
and then restored into procgen, stepped and rendered without a crash.

For every game given, real states from a short random rollout are edited at random (header and
trailer scalars, grid cells, entity fields and positions, entity tables and trailer vectors
resized, the three RNGs' is_seeded flags and mt19937 texts; values from small perturbations to
wild ones) and written with ``to_bytes``. The
validation is ``to_bytes``'s own (restore.check_values, then restore.trial_restore: a forked
set_state, steps and render), run here per state for the value checks and per group of
--batch states for the trial (a failed group is retried state by state). Every accepted state is
then restored into this process's procgen env, stepped --steps times and rendered: a crash ends
this script, and is the failure it looks for. Prints a JSON summary.

    python tools/fuzz_state_edits.py --edits 10000
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from procgen_entities import GAME_NAMES, State, StateDecodeError, parse_states
from procgen_entities.errors import UsageError
from procgen_entities.games import NUM_ACTIONS
from procgen_entities.restore import check_values, trial_restore
from procgen_entities.state import procgen_options

WILD = [0, 1, -1, 2, 0.5, -0.0, 1e39, 2.0**31, -(2.0**31), float("nan"), float("inf"), 1e6, 100]


def _perturbed(rng: np.random.Generator, value: Any) -> Any:
    if rng.random() < 0.3:
        return WILD[rng.integers(len(WILD))]
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + int(rng.integers(-3, 4))
    return float(value) + float(rng.normal(0, 1))


def _edit_rng(state: State, rng: np.random.Generator) -> str:
    """One of the three RNGs edited: its is_seeded flipped, or its mt19937 text garbled (random
    digits, a word dropped, doubled, too big or not a number, the position past 624) or given
    another valid word (which is accepted)."""
    k = int(rng.integers(3))
    seeded, text = state.rngs[k]
    words = text.split(b" ")
    choice = int(rng.integers(7))
    if choice == 0:
        seeded = not seeded
    elif choice == 1:
        words = ["".join(map(str, rng.integers(0, 10, int(rng.integers(1, 80))))).encode()]
    elif choice == 2 and len(words) > 1:
        words.pop(int(rng.integers(len(words))))
    elif choice == 3:
        words.insert(int(rng.integers(len(words) + 1)), b"7")
    elif choice == 4:
        words[int(rng.integers(len(words)))] = [b"4294967296", b"-1", b"1x", b""][rng.integers(4)]
    elif choice == 5:
        words[-1] = str(int(rng.integers(625, 10**6))).encode()
    else:
        words[int(rng.integers(max(1, len(words) - 1)))] = str(rng.integers(2**32)).encode()
    rngs = list(state.rngs)
    rngs[k] = (seeded, b" ".join(words))
    state.rngs = tuple(rngs)
    return f"rng.{('level_seed_rand_gen', 'rand_gen', 'asset_rand_gen')[k]}"


def edit(state: State, rng: np.random.Generator, tiles: np.ndarray) -> str:
    """One random edit in place; returns what was edited."""
    what = int(rng.integers(8))
    ents = state.entities
    if what == 0:
        name = str(rng.choice(list(state.scalars)))
        state.scalars[name] = _perturbed(rng, state.scalars[name])
        return f"scalar.{name}"
    if what == 1 and state.grid.size:
        cell = int(rng.integers(state.grid.size))
        state.grid.flat[cell] = (
            int(rng.choice(tiles)) if rng.random() < 0.8 else int(rng.integers(-5, 2000))
        )
        return "grid"
    if what == 2 and len(ents):
        field = str(rng.choice(list(ents.dtype.names or ())))
        k = int(rng.integers(len(ents)))
        with np.errstate(invalid="ignore", over="ignore"):
            new = _perturbed(rng, ents[field][k].item())
            if ents.dtype[field].kind == "i":
                new = int(np.clip(np.nan_to_num(new), -(2**31), 2**31 - 1))
            ents[field][k] = new
        return f"entity.{field}"
    if what == 3 and len(ents):
        k = int(rng.integers(len(ents)))
        h, w = state.grid.shape
        ents["x"][k] = rng.integers(0, max(1, w)) + 0.5
        ents["y"][k] = rng.integers(0, max(1, h)) + 0.5
        return "entity.move"
    if what == 4:
        state.entities = np.resize(ents, int(rng.integers(0, len(ents) + 3)))
        return "entities.resize"
    if what == 5 and state.trailer:
        name = str(rng.choice(list(state.trailer)))
        old = state.trailer[name]
        if isinstance(old, np.ndarray):
            state.trailer[name] = np.resize(old, int(rng.integers(0, len(old) + 3)))
        else:
            state.trailer[name] = _perturbed(rng, old)
        return f"trailer.{name}"
    if what == 6:
        return _edit_rng(state, rng)
    state.scalars["cur_time"] = int(rng.integers(0, 2000))
    return "scalar.cur_time"


def rollout(game: str, seed: int, steps: int = 60) -> List[bytes]:
    from procgen import ProcgenGym3Env

    env = ProcgenGym3Env(num=2, env_name=game, distribution_mode="hard", rand_seed=seed)
    rng = np.random.default_rng(seed)
    blobs: List[bytes] = []
    for _ in range(steps):
        env.act(rng.integers(0, NUM_ACTIONS, size=2))
        blobs.extend(env.callmethod("get_state"))
    return blobs


def _trial(game: str, blobs: List[bytes], options: Dict[str, Any]) -> List[bool]:
    """Which blobs survive the forked trial: the group at once, one by one if it fails."""
    try:
        trial_restore(game, blobs, options)
        return [True] * len(blobs)
    except StateDecodeError:
        if len(blobs) == 1:
            return [False]
    return [ok for b in blobs for ok in _trial(game, [b], options)]


def fuzz_game(game: str, edits: int, seed: int, batch: int, steps: int) -> Dict[str, Any]:
    from procgen import ProcgenGym3Env

    rng = np.random.default_rng(seed)
    blobs = rollout(game, seed)
    tiles = np.unique(np.concatenate([State.from_bytes(b).grid.ravel() for b in blobs[::10]]))
    outcome: Counter = Counter()
    refused_at: Counter = Counter()
    accepted_kinds: Counter = Counter()  # what the accepted states had edited
    pending: List[Tuple[bytes, State]] = []
    env: Optional[Any] = None
    options = procgen_options(State.from_bytes(blobs[0]).scalars)

    def play(accepted: List[bytes]) -> None:
        nonlocal env
        if env is None:
            env = ProcgenGym3Env(num=1, env_name=game, **options)
        for blob in accepted:
            env.callmethod("set_state", [blob])
            for _ in range(steps):
                env.act(rng.integers(0, NUM_ACTIONS, size=1))
                env.observe()
            env.callmethod("get_state")
            outcome["stepped"] += 1

    def flush() -> None:
        ok = _trial(game, [b for b, _ in pending], options)
        outcome["refused_trial"] += ok.count(False)
        play([b for (b, _), good in zip(pending, ok) if good])
        pending.clear()

    for _ in range(edits):
        base = blobs[int(rng.integers(len(blobs)))]
        state = State.from_bytes(base)
        fields = [edit(state, rng, tiles) for _ in range(int(rng.integers(1, 4)))]
        try:
            blob = state.to_bytes(validate=False)
        except (StateDecodeError, UsageError) as exc:
            outcome["refused_writer"] += 1
            refused_at[getattr(exc, "field", type(exc).__name__)] += 1
            continue
        try:
            check_values([blob], game, parse_states([base], game=game))
        except StateDecodeError as exc:
            outcome["refused_values"] += 1
            refused_at[exc.field] += 1
            continue
        outcome["accepted_values"] += 1
        accepted_kinds.update({f.split(".")[0] for f in fields})
        pending.append((blob, state))
        if len(pending) >= batch:
            flush()
    if pending:
        flush()
    return {
        "edits": edits,
        **outcome,
        "accepted_edit_kinds": dict(accepted_kinds),
        "top_refusals": refused_at.most_common(8),
    }


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edits", type=int, default=10_000, help="in all, split over the games")
    parser.add_argument("--games", nargs="+", default=list(GAME_NAMES))
    parser.add_argument("--batch", type=int, default=64, help="states per forked trial")
    parser.add_argument("--steps", type=int, default=5, help="steps after each restore")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    start = time.monotonic()
    per_game = max(1, args.edits // len(args.games))
    results = {
        game: fuzz_game(game, per_game, args.seed + i, args.batch, args.steps)
        for i, game in enumerate(args.games)
    }
    totals: Counter = Counter()
    for r in results.values():
        totals.update({k: v for k, v in r.items() if isinstance(v, int)})
    print(json.dumps({"totals": totals, "seconds": round(time.monotonic() - start, 1),
                      "games": results}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
