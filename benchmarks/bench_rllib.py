"""Env steps sampled per second by RLlib's EnvRunners, against EntityVectorEnv alone, same run.

    python benchmarks/bench_rllib.py [--game coinrun] [--envs 64] [--rollout 64] [--repeats 7]
                                     [--no-profile]

Starts a Ray instance on this machine (its own temp dir, a small object store) and builds the
same PPO configuration (procgen_entities.rllib.build_config: flat observation, the game's
training tilemap, NEXT_STEP, one env-pool thread and one torch thread per runner, MLP 256x256)
in several forms, all alive at once; then times, in interleaved blocks (so a slow spell of the
shared machine hits all alike; medians of the blocks):

  alone, 1 / 2 threads   EntityVectorEnv (the env each runner hosts) stepping random actions in
                         this process, its pool on 1 / 2 threads: what the env can give
  vector_entry_point x K RLlib with K EnvRunners (K = 1, 2), each hosting one EntityVectorEnv of
                         --envs envs (gym_env_vectorize_mode="vector_entry_point")
  sync x K               the same, but gym_env_vectorize_mode="sync": Gymnasium's SyncVectorEnv
                         over --envs single EntityEnv (what RLlib does with an env id that has
                         no vector entry point)

A block of an RLlib form is what PPO's sampling phase does each iteration:
``synchronous_parallel_sample`` of K * envs * rollout env steps (each runner samples --rollout
steps of each env with the policy, and the episodes come back to this process). Then, unless
--no-profile, where the time of one runner's ``sample()`` goes: cProfile inside the runner,
grouped by RLlib's stages.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import statistics
import tempfile
import time
from typing import Any, Callable, Dict, List

import numpy as np

from procgen_entities.games import NUM_ACTIONS

SAMPLING_FORMS = [("vector_entry_point", 1), ("vector_entry_point", 2), ("sync", 1), ("sync", 2)]


def form_name(vectorize: str, runners: int) -> str:
    return f"{vectorize} x {runners}"


def rllib_runner(algo: Any, batch: int) -> Callable[[], int]:
    from ray.rllib.execution.rollout_ops import synchronous_parallel_sample

    def run() -> int:
        episodes, _ = synchronous_parallel_sample(
            worker_set=algo.env_runner_group,
            max_env_steps=batch,
            _uses_new_env_runners=True,
            _return_metrics=True,
        )
        return sum(len(e) for e in episodes)

    return run


def runner_side(algo: Any, steps: int) -> Callable[[], int]:
    """Each runner samples ``steps`` steps of each env and returns only the count: RLlib's
    EnvRunner loop without shipping the episodes to this process."""

    def count(env_runner: Any) -> int:
        episodes = env_runner.sample(num_timesteps=steps * env_runner.num_envs, explore=True)
        return sum(len(e) for e in episodes)

    def run() -> int:
        return sum(algo.env_runner_group.foreach_env_runner(count, local_env_runner=False))

    return run


def alone_runner(game: str, envs: int, threads: int, steps: int) -> Callable[[], int]:
    from procgen_entities.gymnasium import EntityVectorEnv
    from procgen_entities.rllib import env_options

    env = EntityVectorEnv(game, envs, **env_options(game, env_threads=threads))
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, NUM_ACTIONS, (32, envs))

    def run() -> int:
        for i in range(steps):
            env.step(actions[i % 32])
        return steps * envs

    return run


def interleaved(runners: Dict[str, Callable[[], int]], repeats: int) -> Dict[str, float]:
    for run in runners.values():
        run()  # warm up (first episodes, torch's first calls)
    rates: Dict[str, List[float]] = {name: [] for name in runners}
    for _ in range(repeats):
        for name, run in runners.items():
            start = time.perf_counter()
            steps = run()
            rates[name].append(steps / (time.perf_counter() - start))
    return {name: statistics.median(values) for name, values in rates.items()}


# ---- where a runner's sample() time goes (runs inside the EnvRunner) ----

#: (stage, file suffix, function) whose cumulative time is the stage's; the first match wins
#: for nested calls (the env's step is inside Gymnasium's DictInfoToList.step).
STAGES = [
    ("env.step: EntityVectorEnv (C step + padding)", "gymnasium/vector.py", "step"),
    ("env.step: SyncVectorEnv over EntityEnv", "vector/sync_vector_env.py", "step"),
    ("env.step total incl. DictInfoToList", "wrappers/vector/dict_info_to_list.py", "step"),
    ("RLModule forward (torch)", "rl_module.py", "forward_exploration"),
    ("connectors (env-to-module + module-to-env)", "connector_pipeline_v2.py", "__call__"),
    ("episode bookkeeping (add_env_step/reset)", "single_agent_episode.py", "add_env_step"),
    ("  (add_env_reset)", "single_agent_episode.py", "add_env_reset"),
    ("per-env callbacks (on_episode_*)", "single_agent_env_runner.py", "_make_on_episode_callback"),
    ("unbatch obs/actions per env", "spaces/space_utils.py", "unbatch"),
    ("episodes to numpy", "single_agent_episode.py", "to_numpy"),
]


def profile_sample(env_runner: Any, steps: int) -> Dict[str, float]:
    """cProfile one ``sample()`` of ``steps`` steps per env: seconds per stage, and totals."""
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    episodes = env_runner.sample(num_timesteps=steps * env_runner.num_envs, explore=True)
    profiler.disable()
    wall = time.perf_counter() - start
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    out: Dict[str, float] = {"wall": wall, "env steps": float(sum(len(e) for e in episodes))}
    for stage, suffix, function in STAGES:
        out[stage] = sum(
            cumulative
            for (filename, _, name), (_, _, _, cumulative, _) in stats.items()
            if name == function and filename.endswith(suffix)
        )
    out["profiled total (sample)"] = sum(
        cumulative
        for (filename, _, name), (_, _, _, cumulative, _) in stats.items()
        if name == "sample" and filename.endswith("single_agent_env_runner.py")
    )
    return out


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--game", default="coinrun")
    parser.add_argument("--envs", type=int, default=64, help="envs per EnvRunner")
    parser.add_argument("--rollout", type=int, default=64, help="steps of each env per block")
    parser.add_argument("--repeats", type=int, default=7, help="blocks per form")
    parser.add_argument("--no-profile", action="store_true")
    return parser.parse_args()


def build_runners(args: argparse.Namespace, algos: Dict[str, Any]) -> Dict[str, Callable[[], int]]:
    """The timed forms: the env alone, and every RLlib form (its algorithm added to ``algos``,
    which the caller stops)."""
    from procgen_entities.rllib import build_config

    runners: Dict[str, Callable[[], int]] = {}
    for threads in (1, 2):
        runners[f"alone, {threads} thread(s)"] = alone_runner(
            args.game, args.envs, threads, args.rollout
        )
    for vectorize, k in SAMPLING_FORMS:
        config = build_config(
            args.game, env_runners=k, envs_per_runner=args.envs, vectorize=vectorize,
            rollout_length=args.rollout, seed=0, record_episodes=False,
        )  # fmt: skip
        algos[form_name(vectorize, k)] = algo = config.build_algo()
        runners[form_name(vectorize, k)] = rllib_runner(algo, k * args.envs * args.rollout)
        if vectorize == "vector_entry_point":
            runners[f"{form_name(vectorize, k)}, in runners"] = runner_side(algo, args.rollout)
    return runners


def print_rates(rates: Dict[str, float]) -> None:
    print(f"\n  {'':28s} {'env steps/s':>12s}")
    for name, rate in rates.items():
        print(f"  {name:28s} {rate:12,.0f}")
    alone1, alone2 = rates["alone, 1 thread(s)"], rates["alone, 2 thread(s)"]
    print("\n  ratios")
    for k in (1, 2):
        vep = rates[form_name("vector_entry_point", k)]
        sync = rates[form_name("sync", k)]
        print(f"    vector_entry_point / sync, {k} runner(s):        {vep / sync:5.2f}x")
        print(f"    vector_entry_point x {k} / alone (1 thread):     {vep / alone1:5.2f}x")
        print(f"    vector_entry_point x {k} / alone (2 threads):    {vep / alone2:5.2f}x")
    two, one = (
        rates[form_name("vector_entry_point", 2)],
        rates[form_name("vector_entry_point", 1)],
    )
    print(f"    vector_entry_point 2 runners / 1 runner:      {two / one:5.2f}x")


def profile_runners(algos: Dict[str, Any], steps: int, envs: int) -> None:
    """Where one runner's sample() time goes, for each vectorize mode with one runner."""
    for vectorize in ("vector_entry_point", "sync"):
        algo = algos[form_name(vectorize, 1)]

        def profile(runner: Any, steps: int = steps) -> Dict[str, float]:
            return profile_sample(runner, steps)

        found = algo.env_runner_group.foreach_env_runner(profile, local_env_runner=False)
        timers = algo.env_runner_group.foreach_env_runner(rllib_timers, local_env_runner=False)
        report(vectorize, found[0], timers[0], envs)


def main() -> None:
    args = parse_args()
    import ray

    temp_dir = tempfile.mkdtemp(prefix="bench-rllib-")
    # Logical CPUs for every runner of every form (they take turns: only one form samples).
    ray.init(
        num_cpus=8, object_store_memory=300 * 2**20, include_dashboard=False,
        _temp_dir=temp_dir, logging_level="ERROR", log_to_driver=False,
    )  # fmt: skip
    algos: Dict[str, Any] = {}
    try:
        runners = build_runners(args, algos)
        print(
            f"{args.game}, {args.envs} envs per runner, blocks of {args.rollout} steps per env, "
            f"{args.repeats} repeats, {os.cpu_count()} cores"
        )
        rates = interleaved(runners, args.repeats)
        print_rates(rates)
        if not args.no_profile:
            profile_runners(algos, args.rollout, args.envs)
    finally:
        for algo in algos.values():
            algo.stop()
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)


def rllib_timers(env_runner: Any) -> Dict[str, float]:
    """RLlib's own timers of this runner, seconds per vector step: EMAs (weights 0.01) of the
    steps of three fresh samples (every weighted step a steady-state one)."""
    env_runner.get_metrics()  # reduce (and so restart) what earlier samples logged
    for _ in range(3):
        env_runner.sample(num_timesteps=32 * env_runner.num_envs, explore=True)
    keys = {
        "env step": "env_step_timer",
        "RLModule forward": "rlmodule_inference_timer",
        "env-to-module connectors": ("env_to_module_connector", "connector_pipeline_timer"),
        "module-to-env connectors": ("module_to_env_connector", "connector_pipeline_timer"),
    }
    return {
        name: float(env_runner.metrics.peek(key, default=float("nan")))
        for name, key in keys.items()
    }


def report(vectorize: str, found: Dict[str, float], timers: Dict[str, float], envs: int) -> None:
    print(f"\n  one runner's sample() ({vectorize}, {envs} envs)")
    print("    RLlib's timers (EMA over the last samples), µs per env step:")
    for stage, seconds in timers.items():
        print(f"      {stage:46s} {seconds / envs * 1e6:8.2f}")
    steps = found.pop("env steps")
    wall = found.pop("wall")
    total = found["profiled total (sample)"]
    print(
        f"    cProfile of one sample() ({steps:,.0f} env steps, {steps / wall:,.0f} steps/s "
        "under the profiler), µs per env step and share of sample():"
    )
    for stage, seconds in found.items():
        if seconds > 0:
            print(f"      {stage:46s} {seconds / steps * 1e6:8.2f} {seconds / total:6.1%}")


if __name__ == "__main__":
    main()
