"""Entity steps/s of ProcgenVecEnv's engines against procgen's pixels, measured in the same run.

    python benchmarks/bench_vec_env.py [--games coinrun bigfish] [--envs 64 256]
                                       [--steps 40] [--repeats 7] [--seed-style]

Each game runs with its training observation (Game.training_tilemap, coinrun "columns"; every
game: relative_positions=True), random actions, hard mode. Runners, all with the same env count:
  pixels          procgen act + observe: what pixel agents pay (the baseline of the ratios)
  logic only      the stepper's headless step with no observation at all (ProcgenStepper.advance):
                  procgen's game logic and our stepping, the ceiling of every entity runner
  serial          procgen act + get_state in a Python loop: states, no entities
  headless/direct/get_state   ProcgenVecEnv with that engine, default threads (cores)
  headless 1 thread           thread scaling of the default engine
  gymnasium       EntityVectorEnv (padded arrays + masks, default caps, NEXT_STEP autoreset)
  gymnasium training   EntityVectorEnv.for_training (the training recipe's tilemap and caps),
                  in the mode the others play
  seed-style      (--seed-style) one procgen env per env, Python parse, entity-gym EnvList
Then where a headless step's time goes. Prints each runner's ratio to pixels, to the logic-only
row and to get_state; machines are noisy, so compare within a run.

Without entity-gym (the procgen-gym stack on Python 3.13, where ragged-buffer has no wheels)
the ProcgenVecEnv rows and the breakdown are left out and the engines are measured through
EntityVectorEnv instead (gymnasium / gymnasium direct / gymnasium get_state, the last two in
SAME_STEP): the gymnasium rows against that backend's pixels say what the engine gives there.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

from procgen_entities.backends import backend_name
from procgen_entities.games import NUM_ACTIONS, get_game
from procgen_entities.gymnasium import EntityVectorEnv
from procgen_entities.procgen_envs import make_procgen_env
from procgen_entities.stepper import ProcgenStepper

try:
    from ragged_buffer import RaggedBufferI64

    from procgen_entities.entity_gym.vec_env import ProcgenVecEnv

    HAVE_ENTITY_GYM = True
except ImportError:  # the procgen-gym stack: the Gymnasium rows only
    HAVE_ENTITY_GYM = False


Runners = Dict[str, Callable[[int], None]]


def training_obs(game: str) -> Dict[str, Any]:
    """The game's training tilemap (``Game.training_tilemap``; none for entity-only games)."""
    tilemap = get_game(game).training_tilemap
    return {} if tilemap is None else {"tilemap": tilemap}


def interleaved_rates(
    runners: Dict[str, Callable[[int], None]], steps: Dict[str, int], envs: int, repeats: int
) -> Dict[str, float]:
    """Median env steps/s of each runner. Runners take turns block by block, so a slow spell of
    this shared machine hits all of them alike instead of whichever ran at the time."""
    for name, run in runners.items():
        run(max(5, steps[name] // 10))  # warm up
    samples: Dict[str, List[float]] = {name: [] for name in runners}
    for _ in range(repeats):
        for name, run in runners.items():
            t = time.perf_counter()
            run(steps[name])
            samples[name].append(steps[name] * envs / (time.perf_counter() - t))
    return {name: statistics.median(values) for name, values in samples.items()}


def action_batches(n: int, count: int = 32) -> List[Dict[str, Any]]:
    rng = np.random.default_rng(0)
    ones = np.ones(n, dtype=np.int64)
    return [
        {"move": RaggedBufferI64.from_flattened(rng.integers(0, NUM_ACTIONS, (n, 1)), ones)}
        for _ in range(count)
    ]


def vec_env(game: str, n: int, **kw: Any) -> "ProcgenVecEnv":
    env = ProcgenVecEnv(game, n, seed=0, relative_positions=True, **training_obs(game), **kw)
    env.reset(env.obs_space())
    return env


def make_envs(game: str, n: int) -> Tuple[Dict[str, Any], Dict[str, EntityVectorEnv]]:
    """The ProcgenVecEnv runners' envs (by engine; none without entity-gym) and the Gymnasium
    ones, every one reset."""
    vecs: Dict[str, Any] = {}
    if HAVE_ENTITY_GYM:
        vecs = {engine: vec_env(game, n, engine=engine) for engine in ENGINES}
        if (os.cpu_count() or 1) > 1:
            vecs["headless 1 thread"] = vec_env(game, n, engine="headless", num_threads=1)
    gym_envs = {"gymnasium": gymnasium_env(game, n)}
    if not HAVE_ENTITY_GYM:  # the procgen-stepped engines through the Gymnasium env instead
        for engine in ENGINES[1:]:
            gym_envs[f"gymnasium {engine}"] = gymnasium_env(game, n, engine=engine)
    # the training recipe's observation, in the mode every other runner plays
    gym_envs["gymnasium training"] = EntityVectorEnv.for_training(
        game, n, seed=0, distribution_mode="hard"
    )
    for env in gym_envs.values():
        env.reset()
    return vecs, gym_envs


def procgen_runners(game: str, n: int, raw: np.ndarray, closers: List[Any]) -> Runners:
    """pixels (procgen act + observe) and serial (procgen act + get_state in Python)."""
    serial_env = make_procgen_env(game, n, rand_seed=0)
    pixel_env = make_procgen_env(game, n, rand_seed=0)
    closers += [serial_env, pixel_env]

    def serial(k: int) -> None:
        for i in range(k):
            serial_env.act(raw[i % 32])
            serial_env.callmethod("get_state")

    def pixels(k: int) -> None:
        for i in range(k):
            pixel_env.act(raw[i % 32])
            pixel_env.observe()

    return {"pixels": pixels, "logic only": logic_runner(game, n, raw, closers), "serial": serial}


def logic_runner(game: str, n: int, raw: np.ndarray, closers: List[Any]) -> Callable[[int], None]:
    """The headless stepper stepping its games and reading nothing (ProcgenStepper.advance)."""
    stepper = ProcgenStepper(game, n, seed=0, engine="headless")
    closers.append(stepper)
    stepper.restart()

    def logic(k: int) -> None:
        for i in range(k):
            stepper.advance(raw[i % 32])

    return logic


def vec_runner(vec: Any, acts: List[Dict[str, Any]]) -> Callable[[int], None]:
    space = vec.obs_space()

    def run(k: int) -> None:
        for i in range(k):
            vec.act(acts[i % 32], space)

    return run


def gymnasium_runner(env: EntityVectorEnv, raw: np.ndarray) -> Callable[[int], None]:
    def run(k: int) -> None:
        for i in range(k):
            env.step(raw[i % 32])

    return run


def seed_style_runner(game: str, n: int, closers: List[Any]) -> Callable[[int], None]:
    """One procgen env per env, Python parse, entity-gym EnvList (slow)."""
    from entity_gym.env import EnvList

    from procgen_entities.entity_gym.baselines import SeedStyleEnv

    acts = action_batches(n)
    seed_env = EnvList(lambda: SeedStyleEnv(game, 0), n)
    seed_space = seed_env.obs_space()
    seed_env.reset(seed_space)
    closers.append(seed_env)

    def seed_run(k: int) -> None:
        for i in range(k):
            seed_env.act(acts[i % 32], seed_space)

    return seed_run


def bench_game(game: str, n: int, steps: int, repeats: int, seed_style: bool) -> Dict[str, float]:
    raw = np.random.default_rng(0).integers(0, NUM_ACTIONS, (32, n)).astype(np.int32)
    closers: List[Any] = []
    try:
        runners = procgen_runners(game, n, raw, closers)
        vecs, gym_envs = make_envs(game, n)
        closers += [*vecs.values(), *gym_envs.values()]
        acts = action_batches(n) if HAVE_ENTITY_GYM else []
        runners.update({name: vec_runner(vec, acts) for name, vec in vecs.items()})
        runners.update({name: gymnasium_runner(env, raw) for name, env in gym_envs.items()})
        block = {name: steps for name in runners}
        for fast in ("logic only", "headless", "headless 1 thread", "gymnasium",
                     "gymnasium training"):  # fmt: skip
            block[fast] = steps * 4  # fast: longer blocks
        if seed_style:
            runners["seed-style"] = seed_style_runner(game, n, closers)
            block["seed-style"] = max(5, steps // 8)
        return interleaved_rates(runners, block, n, repeats)
    finally:
        for env in closers:
            env.close()


ENGINES = ("headless", "direct", "get_state")


def gymnasium_env(game: str, n: int, engine: str = "auto") -> EntityVectorEnv:
    """The ProcgenVecEnv runners' observation as a Gymnasium env (SAME_STEP where procgen
    steps: NEXT_STEP needs the headless engine)."""
    mode = "SameStep" if engine in ("direct", "get_state") else None
    return EntityVectorEnv(
        game, n, seed=0, engine=engine, autoreset_mode=mode, relative_positions=True,
        **training_obs(game),
    )  # fmt: skip


def breakdown(game: str, n: int, steps: int) -> Dict[str, float]:
    """µs per env step in each phase of a headless ProcgenVecEnv.act: the native call (step and
    observation, its arrays made first) against the game logic alone (the same envs stepped
    with nothing read), and the VecObs made of the native outputs in Python."""
    vec = vec_env(game, n, engine="headless")
    view = vec._view_for(vec.obs_space())
    acts = [a["move"].as_array().reshape(-1).astype(np.int32) for a in action_batches(n)]
    phases = dict.fromkeys(
        ["game logic alone (advance)", "step + observation (one native call)", "VecObs (Python)"],
        0.0,
    )
    for i in range(steps):
        t0 = time.perf_counter()
        vec.advance(acts[i % 32])
        t1 = time.perf_counter()
        outs = view.outputs()
        result = vec.step_observe(acts[(i + 1) % 32], view.builder, outs)
        t2 = time.perf_counter()
        view.vec_obs(result, outs)
        t3 = time.perf_counter()
        for key, dt in zip(phases, (t1 - t0, t2 - t1, t3 - t2)):
            phases[key] += dt
    vec.close()
    return {k: v / steps / n * 1e6 for k, v in phases.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--games", nargs="+", default=["coinrun", "bigfish"])
    parser.add_argument("--envs", nargs="+", type=int, default=[64, 256])
    parser.add_argument("--steps", type=int, default=40, help="steps per timed block")
    parser.add_argument("--repeats", type=int, default=7, help="blocks per runner")
    parser.add_argument("--seed-style", action="store_true", help="add the slow seed-style env")
    args = parser.parse_args()
    print(
        f"{args.steps} steps x {args.repeats} repeats, {os.cpu_count()} cores, procgen backend "
        f"{backend_name()} (PROCGEN_ENTITIES_BACKEND selects another)"
        + ("" if HAVE_ENTITY_GYM else "; no entity-gym: the Gymnasium rows only")
    )
    for game in args.games:
        for n in args.envs:
            results = bench_game(game, n, args.steps, args.repeats, args.seed_style)
            print_rates(f"{game}, {n} envs", results)
        if not HAVE_ENTITY_GYM:
            continue
        print(f"  where a headless step goes ({args.envs[0]} envs, µs per env step):")
        for name, us in breakdown(game, args.envs[0], 200).items():
            print(f"    {name:38s} {us:7.2f}")


def print_rates(title: str, results: Dict[str, float]) -> None:
    """Steps/s of every runner and its ratios to pixels, to the logic-only row and to
    get_state."""
    pixels, logic = results["pixels"], results["logic only"]
    get_state = results.get("get_state", results.get("gymnasium get_state", 0.0))
    print(f"\n{title}")
    print(f"  {'':20s} {'steps/s':>9s} {'vs pixels':>10s} {'vs logic':>9s} {'vs get_state':>13s}")
    for name, value in results.items():
        print(f"  {name:20s} {value:9.0f} {value / pixels:9.2f}x {value / logic:8.2f}x "
              f"{value / get_state:12.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
