"""RLlib on a Ray cluster, with the native ``EntityVectorEnv`` in every EnvRunner.

``build_config(game, ...)`` gives an RLlib ``PPOConfig`` (new API stack) whose EnvRunners each
build one ``EntityVectorEnv`` through Gymnasium's ``vector_entry_point``
(``gym_env_vectorize_mode="vector_entry_point"``, ``num_envs_per_env_runner`` envs): the env
steps and pads every env in C, RLlib schedules the runners, restarts failed ones and trains.
``python -m procgen_entities.rllib GAME`` runs it (docs/distributed.md).

Needs the ``ray`` extra; ``import procgen_entities`` and ``procgen_entities.gymnasium`` never
import ray, only this package does.

- Observation: the flat ``Box`` form (``flatten=True``) with RLlib's default MLP encoder.
- Episodes: ``NEXT_STEP`` autoreset (what RLlib's EnvRunners assume; needs the headless engine).
- Env ids: ``"procgen_entities.gymnasium:procgen_entities/<game>-v0"``, which Gymnasium resolves
  in any process by importing the module first (so inside remote EnvRunners too).
- Threads: each runner's env pool and torch run on ``env_threads`` / ``torch_threads`` threads
  (1 by default: one runner per core).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Sequence

from procgen_entities.errors import UsageError
from procgen_entities.games import get_game

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig

__all__ = ["VECTORIZE_MODES", "build_config", "env_id", "env_options"]

#: gym_env_vectorize_mode values: the native vector env, or Gymnasium's vectorizers of EntityEnv.
VECTORIZE_MODES = ("vector_entry_point", "sync", "async")


def env_id(game: str) -> str:
    """The Gymnasium id of ``game`` in the ``module:id`` form any process can resolve."""
    get_game(game)  # refuse unknown games here, not in a remote runner
    return f"procgen_entities.gymnasium:procgen_entities/{game}-v0"


def env_options(
    game: str,
    *,
    vectorize: str = "vector_entry_point",
    env_threads: int = 1,
    tilemap: Optional[str] = "training",
    **options: Any,
) -> Dict[str, Any]:
    """The keyword arguments every runner's env gets (``env_config``): the flat observation
    with the game's training tilemap (``tilemap="training"``), relative positions, NEXT_STEP
    autoreset, ``env_threads`` pool threads; ``options`` go to the env as they are."""
    info = get_game(game)
    out: Dict[str, Any] = {
        "flatten": True,
        "relative_positions": True,
        "tilemap": info.training_tilemap if tilemap == "training" else tilemap,
        "num_threads": int(env_threads),
    }
    if vectorize == "vector_entry_point":
        out["autoreset_mode"] = "NextStep"  # EntityEnv (sync, async) always is NEXT_STEP
    out.update(options)
    return out


def build_config(
    game: str,
    *,
    env_runners: int = 2,
    envs_per_runner: int = 64,
    vectorize: str = "vector_entry_point",
    rollout_length: int = 128,
    minibatch_size: int = 2048,
    num_epochs: int = 3,
    lr: float = 5e-4,
    gamma: float = 0.999,
    lambda_: float = 0.95,
    entropy_coeff: float = 0.01,
    hiddens: Sequence[int] = (256, 256),
    env_threads: int = 1,
    torch_threads: Optional[int] = 1,
    seed: Optional[int] = None,
    runner_resources: Optional[Mapping[str, float]] = None,
    restart_failed_runners: bool = True,
    record_episodes: bool = True,
    env_config: Optional[Mapping[str, Any]] = None,
) -> "PPOConfig":
    """PPO on ``game`` with ``env_runners`` EnvRunners of ``envs_per_runner`` envs each.

    Every iteration samples ``rollout_length`` steps of each env (a train batch of
    ``env_runners * envs_per_runner * rollout_length`` env steps) and trains ``num_epochs``
    epochs of minibatches of ``minibatch_size``. ``vectorize``: ``"vector_entry_point"`` (one
    native EntityVectorEnv per runner) or Gymnasium's ``"sync"``/``"async"`` over ``EntityEnv``
    (for comparison). ``seed``: procgen level seeds per runner (``callbacks.runner_seed``); None
    draws them at random. ``runner_resources``: custom Ray resources each runner needs (to pin
    runners to nodes). ``record_episodes``: log one record per finished episode
    (``callbacks.EPISODES_KEY``). ``env_config``: more EntityVectorEnv keywords
    (``distribution_mode``, ``num_levels``, ``max_entities``, ...).
    """
    _check_sizes(vectorize, env_runners, envs_per_runner, rollout_length)
    batch = max(1, env_runners) * envs_per_runner * rollout_length
    options = env_options(game, vectorize=vectorize, env_threads=env_threads, **(env_config or {}))
    runners = _runner_options(
        env_runners, envs_per_runner, vectorize, rollout_length, env_threads, runner_resources
    )
    training = dict(
        train_batch_size_per_learner=batch, minibatch_size=min(minibatch_size, batch),
        num_epochs=num_epochs, lr=lr, gamma=gamma, lambda_=lambda_,
        entropy_coeff=entropy_coeff, clip_param=0.2, grad_clip=0.5,
    )  # fmt: skip
    callbacks = _callbacks(torch_threads, seed, record_episodes)
    return _ppo_config(game, options, runners, training, hiddens, callbacks, restart_failed_runners)


def _ppo_config(
    game: str,
    options: Dict[str, Any],
    runners: Dict[str, Any],
    training: Dict[str, Any],
    hiddens: Sequence[int],
    callbacks: Dict[str, Any],
    restart_failed_runners: bool,
) -> "PPOConfig":
    """The PPOConfig of build_config's settings (new API stack, torch, one local learner)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    return (
        PPOConfig()
        .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .framework("torch")
        .environment(env=env_id(game), env_config=options)
        .env_runners(**runners)
        .learners(num_learners=0)
        .training(**training)
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=list(hiddens)))
        .callbacks(**callbacks)
        .fault_tolerance(
            restart_failed_env_runners=restart_failed_runners,
            ignore_env_runner_failures=restart_failed_runners,
        )
    )


def _runner_options(
    env_runners: int, envs_per_runner: int, vectorize: str, rollout_length: int,
    env_threads: int, runner_resources: Optional[Mapping[str, float]],
) -> Dict[str, Any]:  # fmt: skip
    """PPOConfig.env_runners' settings: how many runners, their envs, and what each needs."""
    return dict(
        num_env_runners=env_runners,
        num_envs_per_env_runner=envs_per_runner,
        gym_env_vectorize_mode=vectorize,
        rollout_fragment_length=rollout_length,
        num_cpus_per_env_runner=max(1, env_threads),
        custom_resources_per_env_runner=dict(runner_resources or {}),
    )


def _check_sizes(vectorize: str, env_runners: int, envs_per_runner: int, rollout: int) -> None:
    """build_config's refusals, before ray builds anything."""
    if vectorize not in VECTORIZE_MODES:
        raise UsageError(
            f"vectorize must be one of {', '.join(VECTORIZE_MODES)}, got {vectorize!r}"
        )
    if env_runners < 0 or envs_per_runner < 1 or rollout < 1:
        raise UsageError("need env_runners >= 0, envs_per_runner >= 1 and rollout_length >= 1")


def _callbacks(
    torch_threads: Optional[int], seed: Optional[int], record_episodes: bool
) -> Dict[str, Any]:
    """The runners' callbacks: each runner's threads and level seeds when its env is made, and
    (``record_episodes``) one record per finished episode."""
    from procgen_entities.rllib.callbacks import record_episode, set_up_runner

    callbacks: Dict[str, Any] = {
        "on_environment_created": functools.partial(
            set_up_runner, torch_threads=torch_threads, seed=seed
        )
    }
    if record_episodes:
        callbacks["on_episode_end"] = record_episode
    return callbacks
