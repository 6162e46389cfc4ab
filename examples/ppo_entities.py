"""PPO on procgen's entities in one file, CleanRL style (torch, no trainer library).

    python examples/ppo_entities.py --game coinrun --total-timesteps 2000000

The env is the native Gymnasium vector env with the training recipe's observation
(``EntityVectorEnv.for_training``: easy mode, the game's tilemap and caps) in its flat form: every
entity type's padded slots and their masks are one vector per env, so the MLP reads the masks as
inputs and nothing is masked by hand. Gymnasium's own RecordEpisodeStatistics records the
episodes; observations are normalised with running statistics (as SB3's VecNormalize does in the
recipe; Gymnasium's NormalizeObservation accepts only NEXT_STEP envs). Episodes:
``autoreset_mode="Disabled"``, so a finished env is reset here with
``reset(options={"reset_mask": done})`` and every stored transition is a real one (no step of a
terminal observation whose action the env ignores). Needs torch (the train extra).
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from procgen_entities.gymnasium import EntityVectorEnv


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--game", default="coinrun")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--total-timesteps", type=int, default=1_000_000)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--num-steps", type=int, default=256, help="steps per env per rollout")
    p.add_argument("--learning-rate", type=float, default=5e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=8)
    p.add_argument("--update-epochs", type=int, default=3)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    return p.parse_args()


class RunningNorm:
    """Observations scaled by their running mean and variance (all envs, every step)."""

    def __init__(self, size: int) -> None:
        self.mean, self.var, self.count = np.zeros(size), np.ones(size), 1e-4

    def __call__(self, x: np.ndarray) -> torch.Tensor:
        mean, var, n = x.mean(0), x.var(0), len(x)
        total = self.count + n
        delta = mean - self.mean
        self.mean = self.mean + delta * n / total
        self.var = (self.var * self.count + var * n + delta**2 * self.count * n / total) / total
        self.count = total
        scaled = np.clip((x - self.mean) / np.sqrt(self.var + 1e-8), -10, 10)
        return torch.as_tensor(scaled, dtype=torch.float32)


def layer(n_in: int, n_out: int, std: float = np.sqrt(2)) -> nn.Linear:
    linear = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(linear.weight, std)
    nn.init.constant_(linear.bias, 0.0)
    return linear


class Agent(nn.Module):
    def __init__(self, n_obs: int, n_actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(layer(n_obs, 256), nn.Tanh(), layer(256, 256), nn.Tanh(),
                                    layer(256, 1, std=1.0))  # fmt: skip
        self.actor = nn.Sequential(layer(n_obs, 256), nn.Tanh(), layer(256, 256), nn.Tanh(),
                                   layer(256, n_actions, std=0.01))  # fmt: skip

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def act(self, x: torch.Tensor, action: torch.Tensor | None = None) -> tuple:
        dist = Categorical(logits=self.actor(x))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.value(x)


def main() -> None:
    args = parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # the env's thread pool steps procgen on the other cores
    envs = EntityVectorEnv.for_training(
        args.game, args.num_envs, flatten=True, autoreset_mode="Disabled", seed=args.seed
    )
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    n_obs = envs.single_observation_space.shape[0]
    normalize = RunningNorm(n_obs)
    agent = Agent(n_obs, int(envs.single_action_space.n))
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    shape = (args.num_steps, args.num_envs)
    obs = torch.zeros((*shape, n_obs))
    actions, logprobs, rewards, dones, values = (torch.zeros(shape) for _ in range(5))
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    updates = max(1, args.total_timesteps // batch_size)

    next_obs_np, _ = envs.reset(seed=args.seed)
    next_obs = normalize(next_obs_np)
    next_done = torch.zeros(args.num_envs)
    start, global_step = time.time(), 0
    for update in range(1, updates + 1):
        for step in range(args.num_steps):
            global_step += args.num_envs
            obs[step], dones[step] = next_obs, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.act(next_obs)
            actions[step], logprobs[step], values[step] = action, logprob, value
            next_obs_np, reward, terminated, truncated, info = envs.step(action.numpy())
            done = terminated | truncated
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32)
            if done.any():  # DISABLED: start the next episode of the envs that finished
                next_obs_np, _ = envs.reset(options={"reset_mask": done})
                for i in np.flatnonzero(info["_episode"]):
                    print(f"global_step={global_step} episodic_return={info['episode']['r'][i]:.2f}"
                          f" episodic_length={info['episode']['l'][i]}")  # fmt: skip
            next_obs = normalize(next_obs_np)
            next_done = torch.as_tensor(done, dtype=torch.float32)

        with torch.no_grad():  # generalised advantage estimation
            next_value = agent.value(next_obs)
            advantages = torch.zeros(shape)
            last = torch.zeros(args.num_envs)
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    live, following = 1.0 - next_done, next_value
                else:
                    live, following = 1.0 - dones[t + 1], values[t + 1]
                delta = rewards[t] + args.gamma * following * live - values[t]
                last = delta + args.gamma * args.gae_lambda * live * last
                advantages[t] = last
            returns = advantages + values

        b_obs, b_actions = obs.reshape(-1, n_obs), actions.reshape(-1)
        b_logprobs, b_advantages = logprobs.reshape(-1), advantages.reshape(-1)
        b_returns, b_values = returns.reshape(-1), values.reshape(-1)
        for _ in range(args.update_epochs):
            order = torch.randperm(batch_size)
            for first in range(0, batch_size, minibatch_size):
                mb = order[first : first + minibatch_size]
                _, newlogprob, entropy, newvalue = agent.act(b_obs[mb], b_actions[mb].long())
                ratio = (newlogprob - b_logprobs[mb]).exp()
                adv = b_advantages[mb]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                clipped = torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(-adv * ratio, -adv * clipped).mean()
                v_loss = 0.5 * ((newvalue - b_returns[mb]) ** 2).mean()
                loss = pg_loss - args.ent_coef * entropy.mean() + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
        explained = 1 - (b_returns - b_values).var() / (b_returns.var() + 1e-8)
        recent = list(envs.return_queue)[-100:]
        mean_return = f"{np.mean(recent):.2f}" if recent else "no episode yet"
        sps = int(global_step / (time.time() - start))
        print(f"update {update}/{updates} steps {global_step} sps {sps} "
              f"value_loss {v_loss.item():.4f} explained_variance {explained.item():.3f} "
              f"mean_return(100) {mean_return}")  # fmt: skip
    envs.close()


if __name__ == "__main__":
    main()
