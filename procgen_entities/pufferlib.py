"""PufferLib 3.0's PPO trainer (``pufferlib.pufferl.PuffeRL``) on entity observations, on CPU.

``EntityPufferEnv`` is a native ``pufferlib.PufferEnv``: ``EntityVectorEnv`` in its flat form
(one float32 ``Box`` per env) with same-step resets, copied into PufferLib's shared buffers with
one ``np.copyto`` per array; finished episodes' returns and lengths go to the infos PufferLib
logs. ``train(game, steps)`` runs PuffeRL on it with a small MLP and the PPO settings of the
project's recipe, and returns the env steps per second between its first and last update.

Needs pufferlib-core, which this package does not depend on. Its wheel pins torch==2.9.0, whose
CUDA build pulls about 6.8 GB of libraries, so install it beside the train extra's CPU torch
without its dependencies, then its pure-Python ones::

    pip install --no-deps pufferlib-core==3.0.23
    pip install gymnasium psutil rich rich-argparse pyro-ppl

Two workarounds make PuffeRL run there:

1. No default configuration: the wheel ships without the ``default.ini`` that PufferLib's command
   line reads, so ``ppo_config`` builds every key PuffeRL reads.
2. No compiled advantage kernel: ``pufferlib._C`` links libcudart.so.12 and cannot load with the
   CPU torch, and PuffeRL's ``compute_puff_advantage`` then raises. ``train`` puts
   ``puff_advantage`` (the same computation in torch) in its place while it runs.

Importing ``pufferlib.pufferl`` turns every RuntimeWarning into an error, installs rich's
traceback hook and a SIGINT handler that ends the process with status 0; this module imports it
with all three undone (``_import_pufferl``).

Where PuffeRL differs from tools/sb3_ppo.py: rewards are clipped to [-1, 1]; there is no
observation normaliser (the policy reads symlog inputs instead); GAE stops at terminations only
(a truncation, procgen's time limit, is bootstrapped through); minibatches are whole
``bptt_horizon`` segments (sampled uniformly here: ``prio_alpha`` 0).
"""

from __future__ import annotations

import logging
import math
import signal
import sys
import tempfile
import threading
import time
import warnings
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import torch

from procgen_entities.errors import UsageError
from procgen_entities.features import ACTION_LABELS
from procgen_entities.gymnasium import EntityVectorEnv
from procgen_entities.stepper import usable_cpus

__all__ = ["EntityPufferEnv", "MLPPolicy", "ppo_config", "puff_advantage", "train"]

_INSTALL_HINT = (
    "procgen_entities.pufferlib needs PufferLib 3.0 (pufferlib-core), which procgen-entities "
    "does not install. Install it without its dependencies (its pin torch==2.9.0 pulls a 6.8 GB "
    "CUDA stack; it runs on the CPU torch), then its pure-Python ones: "
    "pip install --no-deps pufferlib-core==3.0.23 && "
    "pip install gymnasium psutil rich rich-argparse pyro-ppl"
)


def _import_pufferl() -> Any:
    """``pufferlib.pufferl`` without the process-wide changes its import makes."""
    sigint = signal.getsignal(signal.SIGINT)
    excepthook = sys.excepthook
    log = logging.getLogger("pufferlib")
    level = log.level
    log.setLevel(logging.ERROR)  # its "_C could not load" warning: puff_advantage stands in
    try:
        with warnings.catch_warnings():  # restores the filters (it makes RuntimeWarning an error)
            import pufferlib.pufferl as pufferl
    except ImportError as exc:
        raise ImportError(f"{_INSTALL_HINT} ({exc})", name="pufferlib") from exc
    finally:
        log.setLevel(level)
        sys.excepthook = excepthook  # rich.traceback.install()
        # its handler calls os._exit(0): an interrupted run would look like a successful one
        if sigint is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, sigint)
    return pufferl


_pufferl = _import_pufferl()
import pufferlib  # noqa: E402  (loaded by _import_pufferl already)


class EntityPufferEnv(pufferlib.PufferEnv):  # type: ignore[misc]
    """``num_envs`` envs of ``game`` as one native PufferLib env (one agent per env).

    ``EntityVectorEnv(game, num_envs, flatten=True, autoreset_mode="SameStep", **env_kwargs)``
    (``training_recipe=True``: ``EntityVectorEnv.for_training``, the observation sb3_ppo trains
    on); ``vector_env`` is that env. ``reset`` and ``step`` write its observations, rewards,
    terminations and truncations into PufferLib's buffers (``buf``: PufferLib's shared ones, or
    new) and return them, with infos that hold one dict per step in which episodes ended:
    ``episode_return`` and ``episode_length``, lists over those episodes.
    """

    def __init__(
        self,
        game: str,
        num_envs: int = 1,
        *,
        training_recipe: bool = False,
        buf: Optional[Dict[str, Any]] = None,
        **env_kwargs: Any,
    ) -> None:
        fixed = {"flatten", "autoreset_mode"} & set(env_kwargs)
        if fixed:
            raise UsageError(f"EntityPufferEnv sets {', '.join(sorted(fixed))} itself")
        make = EntityVectorEnv.for_training if training_recipe else EntityVectorEnv
        self.vector_env = make(game, num_envs, flatten=True, autoreset_mode="SameStep",
                               **env_kwargs)  # fmt: skip
        try:
            # PufferEnv.__init__ reads these three to allocate its buffers
            self.single_observation_space = self.vector_env.single_observation_space
            self.single_action_space = self.vector_env.single_action_space
            self.num_agents = self.vector_env.num_envs
            super().__init__(buf)
        except BaseException:
            self.vector_env.close()
            raise
        self._stats_key = self.vector_env.stats_key
        self._closed = False

    def reset(self, seed: Optional[int] = None) -> Tuple[npt.NDArray[np.float32], List[Any]]:
        obs, _ = self.vector_env.reset(seed=seed)
        np.copyto(self.observations, obs)
        self.rewards.fill(0.0)
        self.terminals.fill(False)
        self.truncations.fill(False)
        return self.observations, []

    def step(self, actions: npt.ArrayLike) -> Tuple[Any, Any, Any, Any, List[Dict[str, Any]]]:
        obs, reward, terminated, truncated, info = self.vector_env.step(actions)
        np.copyto(self.observations, obs)
        np.copyto(self.rewards, reward)
        np.copyto(self.terminals, terminated)
        np.copyto(self.truncations, truncated)
        return (self.observations, self.rewards, self.terminals, self.truncations,
                self._episode_infos(info))  # fmt: skip

    def _episode_infos(self, info: Mapping[str, Any]) -> List[Dict[str, Any]]:
        """PuffeRL extends its statistics with list values (and drops arrays), so the ended
        episodes' figures go in as lists."""
        ended = info.get(f"_{self._stats_key}")
        if ended is None:
            return []
        stats = info[self._stats_key]
        return [{"episode_return": stats["r"][ended].tolist(),
                 "episode_length": stats["l"][ended].tolist()}]  # fmt: skip

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.vector_env.close()


def puff_advantage(
    values: torch.Tensor,
    rewards: torch.Tensor,
    terminals: torch.Tensor,
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    gamma: float,
    gae_lambda: float,
    rho_clip: float,
    c_clip: float,
) -> torch.Tensor:
    """PufferLib's advantage in torch (pufferlib-core 3.0.23, extensions/pufferlib.cpp,
    ``puff_advantage_row``): GAE along each row of [segments, horizon] whose TD errors and
    traces are weighted by the importance ratios clipped at ``rho_clip`` and ``c_clip``
    (V-trace). Written into ``advantages`` and returned; its last column is left as given, since
    a segment's last step has no successor to bootstrap from."""
    continues = 1.0 - terminals[:, 1:]
    rho = ratio[:, :-1].clamp(max=rho_clip)
    deltas = rho * (rewards[:, 1:] + gamma * values[:, 1:] * continues - values[:, :-1])
    decay = (gamma * gae_lambda) * ratio[:, :-1].clamp(max=c_clip) * continues
    running = torch.zeros_like(values[:, 0])
    # the recursion runs backwards in time; the rows go together
    for t in range(values.shape[1] - 2, -1, -1):
        running = deltas[:, t] + decay[:, t] * running
        advantages[:, t] = running
    return advantages


@contextmanager
def _cpu_advantage(pufferl: Any) -> Iterator[None]:
    """``puff_advantage`` in PuffeRL's place while a run lasts, where ``pufferlib._C`` is
    missing (PuffeRL.train looks the name up in its module at every call)."""
    original = pufferl.compute_puff_advantage
    if not pufferl._C_AVAILABLE:
        pufferl.compute_puff_advantage = puff_advantage
    try:
        yield
    finally:
        pufferl.compute_puff_advantage = original


def _mlp(inputs: int, hidden: Sequence[int], outputs: int, gain: float) -> torch.nn.Sequential:
    """Tanh layers with orthogonal weights, as SB3's MlpPolicy initialises them."""
    layers: List[torch.nn.Module] = []
    for width in hidden:
        layers += [torch.nn.Linear(inputs, width), torch.nn.Tanh()]
        inputs = width
    layers.append(torch.nn.Linear(inputs, outputs))
    for layer, scale in zip(layers[::2], [math.sqrt(2)] * len(hidden) + [gain]):
        assert isinstance(layer, torch.nn.Linear)
        torch.nn.init.orthogonal_(layer.weight, scale)
        torch.nn.init.zeros_(layer.bias)
    return torch.nn.Sequential(*layers)


class MLPPolicy(torch.nn.Module):
    """The shape of sb3_ppo's MLP (separate policy and value networks, ``hidden`` each) on the
    flat observation through symlog (PuffeRL has no normaliser, and the flat form holds raw
    positions). PuffeRL calls ``forward_eval`` in rollouts and ``forward`` in updates; both
    return (logits, value)."""

    def __init__(self, inputs: int, actions: int, hidden: Sequence[int] = (256, 256)) -> None:
        super().__init__()
        self.actor = _mlp(inputs, hidden, actions, gain=0.01)
        self.critic = _mlp(inputs, hidden, 1, gain=1.0)

    def forward_eval(
        self, observations: torch.Tensor, state: Any = None
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        x = observations.reshape(observations.shape[0], -1).float()
        x = torch.sign(x) * torch.log1p(x.abs())
        return self.actor(x), self.critic(x)

    def forward(
        self, observations: torch.Tensor, state: Any = None
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        return self.forward_eval(observations, state)


#: PPO settings of the project's recipe (tools/sb3_ppo.py HYPERPARAMETERS, procgen's gamma) in
#: PuffeRL's names; ``bptt_horizon`` 256 makes a batch num_envs x 256 steps, as there.
PPO_SETTINGS: Dict[str, Any] = dict(
    gamma=0.999, gae_lambda=0.95, learning_rate=5e-4, clip_coef=0.2, ent_coef=0.01,
    vf_coef=0.5, max_grad_norm=0.5, update_epochs=3, bptt_horizon=256, minibatch_size=2048,
)  # fmt: skip

#: The rest of what PuffeRL reads, where PPO as sb3_ppo runs it has no counterpart: no value
#: clipping, uniform segment sampling (prio_alpha 0 weighs every segment 1), no V-trace
#: clipping beyond PPO's ratio of 1, Adam as SB3 sets it.
_PUFFER_SETTINGS: Dict[str, Any] = dict(
    torch_deterministic=False, device="cpu", cpu_offload=False, use_rnn=False, optimizer="adam",
    adam_beta1=0.9, adam_beta2=0.999, adam_eps=1e-5, anneal_lr=False, precision="float32",
    batch_size="auto", vf_clip_coef=float("inf"), vtrace_rho_clip=1.0, vtrace_c_clip=1.0,
    prio_alpha=0.0, prio_beta0=1.0, compile=False, compile_mode="default",
    compile_fullgraph=False, checkpoint_interval=200,
)  # fmt: skip


def ppo_config(
    game: str,
    steps: int,
    *,
    seed: int,
    num_envs: int,
    data_dir: str,
    overrides: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    """PuffeRL's configuration: every key it reads, ``overrides`` last (known keys only). The
    minibatch shrinks to the batch when that is smaller; ``total_timesteps`` is ``steps``
    rounded up to whole batches (PuffeRL divides by the number of updates)."""
    config: Dict[str, Any] = {**PPO_SETTINGS, **_PUFFER_SETTINGS, "env": f"procgen_entities/{game}",
                              "seed": seed, "data_dir": data_dir}  # fmt: skip
    overrides = dict(overrides or {})
    unknown = set(overrides) - set(config) - {"max_minibatch_size"}
    if unknown:
        raise UsageError(f"config_overrides: unknown keys {sorted(unknown)}")
    config.update(overrides)
    batch = num_envs * int(config["bptt_horizon"])
    if "minibatch_size" not in overrides:
        config["minibatch_size"] = min(config["minibatch_size"], batch)
    config.setdefault("max_minibatch_size", config["minibatch_size"])
    if steps < 1:
        raise UsageError(f"steps must be positive, got {steps}")
    config["total_timesteps"] = math.ceil(steps / batch) * batch
    return config


def _quiet(pufferl: Any, dashboard: bool) -> Any:
    """PuffeRL, or (``dashboard=False``) PuffeRL without its terminal dashboard, a full-screen
    table it redraws every quarter second."""
    if dashboard:
        return pufferl.PuffeRL

    class QuietPuffeRL(pufferl.PuffeRL):  # type: ignore[misc,name-defined]
        def print_dashboard(self, *args: Any, **kwargs: Any) -> None:
            pass

    return QuietPuffeRL


def _trainer(
    config: Dict[str, Any], env: EntityPufferEnv, policy: MLPPolicy, dashboard: bool
) -> Any:
    """PuffeRL of these. Its precision setting always makes an autocast context, and torch warns
    that CPU autocast has no float32 (so it stays off, which is what float32 means): not news."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "In CPU autocast, but the target dtype is not supported")
        return _quiet(_pufferl, dashboard)(config, env, policy)


def _run(trainer: Any, total: int, train_threads: int) -> Dict[str, Any]:
    """The update loop, timed from the end of the first update (past the start-up and the first
    rollout) to the end of the last one; a single update is timed whole."""
    start = time.perf_counter()
    first: Optional[Tuple[float, int]] = None
    updates = 0
    while trainer.global_step < total:
        # as sb3_ppo: one torch thread for the rollout's small forward passes (the env's pool
        # wants the cores), all of them for the gradient steps
        torch.set_num_threads(1)
        trainer.evaluate()
        torch.set_num_threads(train_threads)
        trainer.train()
        updates += 1
        if first is None:
            first = (time.perf_counter(), int(trainer.global_step))
    end = time.perf_counter()
    t0, s0 = first if first is not None and updates > 1 else (start, 0)
    steps = int(trainer.global_step) - s0
    return {"steps": steps, "seconds": end - t0, "steps_per_second": steps / max(end - t0, 1e-9),
            "updates": updates, "total_steps": int(trainer.global_step),
            "losses": {k: float(v) for k, v in trainer.losses.items()}}  # fmt: skip


def train(
    game: str,
    steps: int,
    *,
    seed: int = 0,
    num_envs: int = 64,
    config_overrides: Optional[Mapping[str, Any]] = None,
    dashboard: bool = False,
    **env_kwargs: Any,
) -> Dict[str, Any]:
    """Train PuffeRL on ``game`` for ``steps`` env steps (rounded up to whole batches of
    ``num_envs`` x ``bptt_horizon``) on sb3_ppo's observation (``EntityPufferEnv`` with
    ``training_recipe=True``; ``env_kwargs`` override or add EntityVectorEnv options) with
    ``MLPPolicy`` and ``ppo_config(...)`` (``config_overrides``: PuffeRL keys, e.g.
    ``bptt_horizon``, ``data_dir`` to keep its checkpoints). Returns ``steps``, ``seconds`` and
    ``steps_per_second`` between the end of the first update and the end of the last, and
    ``updates``, ``total_steps`` and the last update's ``losses``."""
    torch.manual_seed(seed)
    threads = torch.get_num_threads()
    env = EntityPufferEnv(game, num_envs, training_recipe=True, seed=seed, **env_kwargs)
    trainer = None
    try:
        with tempfile.TemporaryDirectory(prefix="puffer-") as tmp, _cpu_advantage(_pufferl):
            config = ppo_config(game, steps, seed=seed, num_envs=num_envs, data_dir=tmp,
                                overrides=config_overrides)  # fmt: skip
            # the flat form's observation buffer is [num_envs, size]; procgen has 15 actions
            policy = MLPPolicy(int(env.observations.shape[1]), len(ACTION_LABELS))
            trainer = _trainer(config, env, policy.to(config["device"]), dashboard)
            result = _run(trainer, int(config["total_timesteps"]), usable_cpus())
            trainer.close()  # closes the env and saves the final checkpoint into data_dir
            return result
    finally:
        if trainer is not None:
            trainer.utilization.stop()  # a non-daemon thread: left running, it holds the exit
        env.close()
        torch.set_num_threads(threads)
