"""A lean PPO learner for the SB3 recipes: SB3's algorithm and SB3's policy network, without
SB3's per-step and per-minibatch machinery (needs the train extra).

``LeanPPO`` trains the very ``ActorCriticPolicy`` (or ``MultiInputActorCriticPolicy``) module that
SB3's ``PPO`` builds, initialised the same way from the same seed, so its checkpoints are SB3
checkpoints (agents/checkpoint.py's format, the numpy twin, ``evaluate``) and an SB3 run resumes
under it and back. The algorithm is SB3 2.9's PPO with the recipe's settings: clipped surrogate,
unclipped value loss (``vf_coef`` 0.5), entropy bonus, advantages normalised per minibatch, GAE,
the value of the terminal state added to the reward at a time-limit truncation, the global
gradient norm clipped, Adam (eps 1e-5). tests/test_lean_ppo.py checks that one update from the
same data moves SB3's weights and this learner's to the same place.

Where the time goes instead (benchmarks/bench_training.py measures it against SB3's PPO):

- the network's products run in bfloat16 where the CPU has it (``precision``, torch.autocast;
  the weights, Adam's state, the losses and the returned logits and values stay float32);
- Adam is torch's fused CPU kernel (SB3's default is the per-parameter loop: 17% of a step);
- rollouts run the policy under ``torch.inference_mode`` straight on numpy's memory (no
  ``obs_to_tensor`` copies, no distribution objects), and store every observation key in its
  own dtype (the class image stays uint8, SB3's buffer keeps it as float32);
- the update indexes one flat tensor per key per minibatch and computes the log-probabilities
  and entropy from one ``log_softmax``;
- the policy gets every usable core in the rollouts as in the update (the env's pool and the
  policy take turns); the dict observation is normalised in one numpy pass
  (gymnasium/sb3.py FlatVecNormalize).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Optional, Protocol, Tuple

import numpy as np
import torch
from torch import nn

from procgen_entities.errors import UsageError
from procgen_entities.gymnasium.observation import GLOBAL_KEY, GRID_KEY

__all__ = [
    "LeanHooks",
    "LeanPPO",
    "PRECISIONS",
    "native_bfloat16",
    "resolve_precision",
]

#: The arithmetic of the network's forward and backward passes: float32 (SB3's), or bfloat16
#: products under torch.autocast (CPUs with AVX512-BF16 or AMX run them ~1.5x faster; others
#: emulate them, slower than float32). "auto": bfloat16 where the CPU has it.
PRECISIONS = ("auto", "float32", "bfloat16")
#: The packed observation's key of the MLP's inputs (``LeanPPO._pack``).
INPUTS = "inputs"


def native_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 natively (AVX512-BF16 or AMX-BF16 in its flags)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "").split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(precision: str) -> str:
    """``PRECISIONS`` -> "float32" or "bfloat16" (auto: by ``native_bfloat16``)."""
    if precision not in PRECISIONS:
        raise UsageError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision == "auto":
        return "bfloat16" if native_bfloat16() else "float32"
    return precision


Obs = Any  # a flat float32 batch, or a dict of batches (the dict form)


class LeanHooks(Protocol):
    """What a run's bookkeeping (tools/sb3_ppo.py's metrics) hears from ``LeanPPO.learn``:
    ``advantages`` gets each rollout's GAE advantages and episode starts ([steps, envs]) and its
    last step's dones, after GAE and before ``rollout_end`` (a level sampler scores the
    episodes from them: agents/plr.py)."""

    def rollout_start(self) -> None: ...
    def step(self, infos: Any, num_timesteps: int) -> None: ...
    def advantages(self, advantages: np.ndarray, starts: np.ndarray, dones: np.ndarray) -> None: ...
    def rollout_end(self, model: "LeanPPO") -> None: ...


def _as_tensors(obs: Obs) -> Any:
    """numpy batch(es) -> tensors sharing their memory (no copy)."""
    if isinstance(obs, dict):
        return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in obs.items()}
    return torch.from_numpy(np.ascontiguousarray(obs))


class _Buffer:
    """One rollout: observations in their own dtypes, actions, rewards, values, log-probs,
    episode starts; ``advantages`` and ``returns`` after ``compute_gae``."""

    def __init__(self, sample: Obs, n_steps: int) -> None:
        """``sample``: one step's (packed) observation of every env, the layout to keep."""

        def alloc(batch: np.ndarray) -> np.ndarray:
            return np.zeros((n_steps, *batch.shape), dtype=batch.dtype)

        if isinstance(sample, dict):
            self.obs: Any = {k: alloc(v) for k, v in sample.items()}
        else:
            self.obs = alloc(sample)
        n_envs = len(next(iter(sample.values())) if isinstance(sample, dict) else sample)
        shape = (n_steps, n_envs)
        self.actions = np.zeros(shape, np.int64)
        self.rewards = np.zeros(shape, np.float32)
        self.values = np.zeros(shape, np.float32)
        self.log_probs = np.zeros(shape, np.float32)
        self.starts = np.zeros(shape, np.float32)
        self.advantages = np.zeros(shape, np.float32)
        self.returns = np.zeros(shape, np.float32)

    def put_obs(self, t: int, obs: Obs) -> None:
        if isinstance(obs, dict):
            for key, array in self.obs.items():
                array[t] = obs[key]
        else:
            self.obs[t] = obs

    def compute_gae(self, last_values: np.ndarray, dones: np.ndarray, gamma: float,
                    lam: float) -> None:  # fmt: skip
        """SB3's RolloutBuffer.compute_returns_and_advantage (GAE(lambda), returns = A + V)."""
        last = np.zeros_like(last_values)
        n_steps = self.rewards.shape[0]
        for t in reversed(range(n_steps)):
            if t == n_steps - 1:
                not_done, next_values = 1.0 - dones.astype(np.float32), last_values
            else:
                not_done, next_values = 1.0 - self.starts[t + 1], self.values[t + 1]
            delta = self.rewards[t] + gamma * next_values * not_done - self.values[t]
            last = delta + gamma * lam * not_done * last
            self.advantages[t] = last
        self.returns[:] = self.advantages + self.values

    def flat(self) -> Dict[str, Any]:
        """Every array as a tensor of [steps * envs, ...] (step-major; shared memory)."""

        def f(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(a.reshape(a.shape[0] * a.shape[1], *a.shape[2:]))

        obs = {k: f(v) for k, v in self.obs.items()} if isinstance(self.obs, dict) else f(self.obs)
        return {"obs": obs, "actions": f(self.actions), "values": f(self.values),
                "log_probs": f(self.log_probs), "advantages": f(self.advantages),
                "returns": f(self.returns)}  # fmt: skip


class LeanPPO:
    """PPO on an SB3 ``VecEnv`` (e.g. ``VecNormalize(SB3VecEnv(EntityVectorEnv(...)))``) with
    SB3's policy class: ``LeanPPO("MultiInputPolicy", env, seed=0, **settings).learn(N)``.

    Attributes SB3's ``PPO`` has and the tools use: ``policy`` (its ``optimizer`` is fused
    Adam), ``num_timesteps``, ``ent_coef`` (read per update), ``lr_schedule`` (progress
    remaining -> rate, read per update), ``seed``."""

    def __init__(
        self,
        policy: str,
        env: Any,
        *,
        seed: int = 0,
        learning_rate: float = 5e-4,
        n_steps: int = 256,
        batch_size: int = 2048,
        n_epochs: int = 3,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        clip_range: float = 0.2,
        ent_coef: float = 0.01,
        vf_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        policy_kwargs: Optional[Dict[str, Any]] = None,
        train_threads: int = 0,
        precision: str = "auto",
    ) -> None:
        from stable_baselines3.common.policies import (
            ActorCriticPolicy,
            MultiInputActorCriticPolicy,
        )
        from stable_baselines3.common.utils import set_random_seed

        if policy not in ("MlpPolicy", "MultiInputPolicy"):
            raise UsageError(f"policy must be MlpPolicy or MultiInputPolicy, not {policy!r}")
        if (n_steps * env.num_envs) % batch_size:
            raise UsageError("n_steps * envs must be a multiple of batch_size")
        self.precision = resolve_precision(precision)
        self.env, self.seed = env, seed
        self.n_steps, self.batch_size, self.n_epochs = n_steps, batch_size, n_epochs
        self.gamma, self.gae_lambda, self.clip_range = gamma, gae_lambda, clip_range
        self.ent_coef, self.vf_coef, self.max_grad_norm = ent_coef, vf_coef, max_grad_norm
        self.lr_schedule: Callable[[float], float] = lambda _: learning_rate
        self.train_threads = train_threads or len(os.sched_getaffinity(0))
        self.num_timesteps = 0
        # SB3's PPO seeds python, numpy and torch before it builds the policy: the same
        # initial weights, and the same numpy permutations of the minibatches
        set_random_seed(seed)
        env.seed(seed)
        kind = MultiInputActorCriticPolicy if policy == "MultiInputPolicy" else ActorCriticPolicy
        kwargs = dict(policy_kwargs or {})
        kwargs["optimizer_kwargs"] = {
            "eps": 1e-5,
            "fused": True,
            **kwargs.get("optimizer_kwargs", {}),
        }
        self.policy: Any = kind(env.observation_space, env.action_space, self.lr_schedule, **kwargs)
        self._obs: Obs = None
        self._joint_first_layer = _joint_first_layer(self.policy)
        extractor: Any = self.policy.features_extractor
        self._input_keys = extractor.net.input_keys() if self._joint_first_layer else []
        self._starts = np.ones(env.num_envs, np.float32)
        self._total = 1
        self.buffer: Optional[_Buffer] = None  # the last rollout (tests compare it with SB3's)

    # ---- the network's parts, as SB3's policy wires them ----

    def _forward(self, obs: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        """(logits [B, A], values [B]) of a batch of tensors, float32; with precision
        "bfloat16" the network's products run in bfloat16 (torch.autocast: the weights, the
        heads' outputs, the losses and Adam stay float32)."""
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.precision == "bfloat16"):
            logits, values = self._network(obs)
        return logits.float(), values.float()

    def _network(self, obs: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        p = self.policy
        if self._joint_first_layer:
            return self._flat_grid_network(obs)
        features = p.extract_features(obs)
        if p.share_features_extractor:
            latent_pi, latent_vf = p.mlp_extractor(features)
        else:
            latent_pi = p.mlp_extractor.forward_actor(features[0])
            latent_vf = p.mlp_extractor.forward_critic(features[1])
        return p.action_net(latent_pi), p.value_net(latent_vf).squeeze(-1)

    def _pack(self, obs: Obs) -> Obs:
        """The observation as the network reads it: for FlatGridExtractor, the slot values,
        masks and globals side by side in its order (one float32 array, made by numpy once,
        stored once, indexed once per minibatch: not 2 x types small tensors per pass) and
        the class image; other policies' observations as they are."""
        if not self._joint_first_layer:
            return obs
        n = len(obs[GLOBAL_KEY])
        inputs = np.concatenate([obs[key].reshape(n, -1) for key in self._input_keys], axis=1,
                                dtype=np.float32)  # fmt: skip
        return {INPUTS: inputs, GRID_KEY: obs[GRID_KEY]}

    def _flat_grid_network(self, obs: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        """FlatGridExtractor's policy, the same function by another route (on ``_pack``'s
        form): the slot values (inputs: no gradient) and the CNN's features (a gradient) meet
        the policy's and the value's first layers as two products, ``W[:, :D] x + W[:, D:]
        cnn``, with both heads' weights stacked. Through the concatenation autograd would form
        the gradient of all D inputs of both first layers, of which only the CNN's 64 are
        needed."""
        p = self.policy
        inputs = obs[INPUTS]
        cnn = p.features_extractor.net.grid(obs[GRID_KEY])
        pi, vf = p.mlp_extractor.policy_net, p.mlp_extractor.value_net
        weight = torch.cat([pi[0].weight, vf[0].weight])
        bias = torch.cat([pi[0].bias, vf[0].bias])
        d = inputs.shape[1]
        first = nn.functional.linear(inputs, weight[:, :d]) + nn.functional.linear(
            cnn, weight[:, d:], bias
        )
        latent_pi, latent_vf = first.split([pi[0].out_features, vf[0].out_features], dim=1)
        latent_pi, latent_vf = pi[1:](latent_pi), vf[1:](latent_vf)
        return p.action_net(latent_pi), p.value_net(latent_vf).squeeze(-1)

    def _values(self, obs: Obs) -> np.ndarray:
        with torch.inference_mode():
            return self._forward(_as_tensors(self._pack(obs)))[1].numpy()

    # ---- rollouts ----

    def _terminal_values(self, infos: Any, dones: np.ndarray) -> Dict[int, float]:
        """V(terminal state) of the envs whose episodes a time limit cut (SB3 adds gamma times
        it to the last reward)."""
        cut = [
            i
            for i in np.flatnonzero(dones)
            if infos[i].get("TimeLimit.truncated") and "terminal_observation" in infos[i]
        ]
        if not cut:
            return {}
        first = infos[cut[0]]["terminal_observation"]
        if isinstance(first, dict):
            batch: Obs = {k: np.stack([infos[i]["terminal_observation"][k] for i in cut])
                          for k in first}  # fmt: skip
        else:
            batch = np.stack([infos[i]["terminal_observation"] for i in cut])
        return dict(zip(cut, self._values(batch).tolist()))

    def _collect(self, buffer: _Buffer, hooks: Optional[LeanHooks]) -> np.ndarray:
        """Fill ``buffer`` with n_steps of every env; returns the last step's dones."""
        if hooks is not None:
            hooks.rollout_start()
        # env steps and the policy take turns (the pool's workers sleep while the policy
        # runs), so the policy gets every core: 0.97 s against 1.36 s per coinrun rollout
        torch.set_num_threads(self.train_threads)
        dones = np.zeros(self.env.num_envs, bool)
        for t in range(self.n_steps):
            packed = self._pack(self._obs)
            with torch.inference_mode():
                logits, values = self._forward(_as_tensors(packed))
                dist = torch.distributions.Categorical(logits=logits, validate_args=False)
                actions = dist.sample()
                log_probs = dist.log_prob(actions)
            buffer.put_obs(t, packed)
            buffer.actions[t] = actions.numpy()
            buffer.values[t] = values.numpy()
            buffer.log_probs[t] = log_probs.numpy()
            buffer.starts[t] = self._starts
            self.env.step_async(actions.numpy())
            self._obs, rewards, dones, infos = self.env.step_wait()
            self.num_timesteps += self.env.num_envs
            rewards = np.array(rewards)  # SB3 adds the bootstrap in the env's dtype
            for i, value in self._terminal_values(infos, dones).items():
                rewards[i] += self.gamma * value
            buffer.rewards[t] = rewards
            self._starts = dones.astype(np.float32)
            if hooks is not None:
                hooks.step(infos, self.num_timesteps)
        buffer.compute_gae(self._values(self._obs), dones, self.gamma, self.gae_lambda)
        if hooks is not None:
            hooks.advantages(buffer.advantages, buffer.starts, dones)
        return dones

    # ---- the update ----

    def _minibatch_loss(self, data: Dict[str, Any], idx: torch.Tensor) -> torch.Tensor:
        obs = data["obs"]
        batch = {k: v[idx] for k, v in obs.items()} if isinstance(obs, dict) else obs[idx]
        logits, values = self._forward(batch)
        log_all = torch.log_softmax(logits, dim=-1)
        log_prob = log_all.gather(1, data["actions"][idx].unsqueeze(1)).squeeze(1)
        entropy = -(log_all.exp() * log_all).sum(-1)
        adv = data["advantages"][idx]
        if adv.numel() > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        ratio = (log_prob - data["log_probs"][idx]).exp()
        clip = self.clip_range
        policy_loss = -torch.min(adv * ratio, adv * ratio.clamp(1 - clip, 1 + clip)).mean()
        value_loss = nn.functional.mse_loss(data["returns"][idx], values)
        entropy_mean = entropy.mean()
        return policy_loss - self.ent_coef * entropy_mean + self.vf_coef * value_loss  # type: ignore[no-any-return]

    def _update(self, buffer: _Buffer) -> None:
        """n_epochs over the rollout in minibatches of batch_size (numpy's global permutation,
        as SB3's RolloutBuffer.get draws it)."""
        torch.set_num_threads(self.train_threads)
        self.policy.set_training_mode(True)
        rate = self.lr_schedule(1.0 - self.num_timesteps / max(self._total, 1))
        for group in self.policy.optimizer.param_groups:
            group["lr"] = rate
        data = buffer.flat()
        size = data["actions"].shape[0]
        steps, envs = buffer.actions.shape
        # SB3 permutes its buffer flattened env-major (all steps of env 0 first); the same
        # permutation, read through this step-major buffer, picks the same minibatches
        env_major = torch.arange(size)
        env_major = (env_major % steps) * envs + env_major // steps
        params = list(self.policy.parameters())
        for _ in range(self.n_epochs):
            order = env_major[torch.from_numpy(np.random.permutation(size))]
            for start in range(0, size, self.batch_size):
                loss = self._minibatch_loss(data, order[start : start + self.batch_size])
                self.policy.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(params, self.max_grad_norm)
                self.policy.optimizer.step()
        self.policy.set_training_mode(False)

    def learn(
        self,
        total_timesteps: int,
        hooks: Optional[LeanHooks] = None,
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> "LeanPPO":
        """Train for ``total_timesteps`` more env steps (rounded up to whole rollouts)."""
        if reset_num_timesteps:
            self.num_timesteps = 0
        end = self.num_timesteps + total_timesteps
        self._total = end if reset_num_timesteps else max(end, self._total)
        if self._obs is None:
            self._obs = self.env.reset()
            self._starts[:] = 1.0
        self.buffer = buffer = _Buffer(self._pack(self._obs), self.n_steps)
        bar = _progress(total_timesteps) if progress_bar else None
        while self.num_timesteps < end:
            before = self.num_timesteps
            self.policy.set_training_mode(False)
            self._collect(buffer, hooks)
            if hooks is not None:
                hooks.rollout_end(self)
            self._update(buffer)
            if bar is not None:
                bar.update(self.num_timesteps - before)
        if bar is not None:
            bar.close()
        return self


def _joint_first_layer(policy: Any) -> bool:
    """Whether ``_flat_grid_network`` computes this policy: FlatGridExtractor shared by both
    heads, each head an MLP whose first module is a Linear layer."""
    from procgen_entities.gymnasium.sb3 import FlatGridExtractor

    heads = (policy.mlp_extractor.policy_net, policy.mlp_extractor.value_net)
    return (
        isinstance(policy.features_extractor, FlatGridExtractor)
        and policy.share_features_extractor
        and all(len(h) > 0 and isinstance(h[0], nn.Linear) for h in heads)
    )


def _progress(total: int) -> Any:
    """A tqdm bar on a terminal (SB3's progress_bar uses tqdm too); a plain no-op otherwise."""
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm comes with the train extra

        class _Quiet:
            def update(self, n: int) -> None: ...
            def close(self) -> None: ...

        return _Quiet()
    return tqdm(total=total, unit="step", unit_scale=True, smoothing=0.05, mininterval=2.0,
                disable=None)  # fmt: skip
