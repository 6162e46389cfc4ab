"""The lean PPO learner (agents/lean_ppo.py) against SB3's PPO: same seed, same env, same policy
network -> the same rollout and, after one update, the same weights (up to float32 rounding of
a fused Adam); and sb3_ppo trains, checkpoints and resumes with it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.vec_env import VecNormalize  # noqa: E402

from procgen_entities.agents.checkpoint import EnvConfig, make_env  # noqa: E402
from procgen_entities.agents.lean_ppo import LeanPPO  # noqa: E402
from procgen_entities.gymnasium.sb3 import (  # noqa: E402
    FlatGridExtractor,
    SB3VecEnv,
    normalized_keys,
)
from procgen_entities.tools.sb3_ppo import main as sb3_ppo  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SETTINGS = dict(n_steps=32, batch_size=64, n_epochs=2, gamma=0.999, gae_lambda=0.95,
                learning_rate=5e-4, clip_range=0.2, max_grad_norm=0.5, ent_coef=0.01)  # fmt: skip
CONFIG = EnvConfig(game="coinrun", tilemap="columns", grid=True, grid_entities=True,
                   max_entities={"Saw": 4, "Enemy": 4, "Crate": 4, "Wall": 8, "Lava": 4,
                                 "Goal": 1, "Barrier": 2})  # fmt: skip


def _env(grid: bool) -> VecNormalize:
    config = CONFIG if grid else EnvConfig(game="coinrun", tilemap="columns")
    env = SB3VecEnv(make_env(config, 4, 7, flatten=not grid))
    keys = normalized_keys(env.observation_space) if grid else None
    return VecNormalize(env, gamma=SETTINGS["gamma"], norm_obs_keys=keys)


def _state(policy: object) -> dict:
    return {k: v.detach().clone() for k, v in policy.state_dict().items()}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "grid,shared",
    [(True, True), (False, True), (True, False)],
    ids=["grid", "flat", "grid-separate-value"],
)
def test_one_update_moves_the_weights_where_sb3s_does(grid: bool, shared: bool) -> None:
    kind = "MultiInputPolicy" if grid else "MlpPolicy"
    # shared=False: the value head's own CNN (sb3_ppo --separate-value), another code path
    kwargs: dict = {"net_arch": [64, 64], "share_features_extractor": shared}
    if grid:
        kwargs["features_extractor_class"] = FlatGridExtractor
    envs = (_env(grid), _env(grid))
    theirs = PPO(kind, envs[0], seed=3, device="cpu", policy_kwargs=kwargs, **SETTINGS)
    mine = LeanPPO(kind, envs[1], seed=3, policy_kwargs=kwargs, precision="float32", **SETTINGS)
    start = _state(theirs.policy)
    assert start.keys() == _state(mine.policy).keys()
    for key, value in _state(mine.policy).items():  # the same initialisation from the seed
        assert torch.equal(value, start[key]), key
    steps = SETTINGS["n_steps"] * 4
    # both seeded the global generators the same way; each learns from that same state
    generators = torch.get_rng_state(), np.random.get_state()
    theirs.learn(steps)
    torch.set_rng_state(generators[0])
    np.random.set_state(generators[1])
    mine.learn(steps)
    # the same rollout: actions, rewards and GAE advantages, step by step
    buffer = theirs.rollout_buffer
    assert mine.buffer is not None

    def env_major(a: np.ndarray) -> np.ndarray:  # SB3 flattens its buffer so after get()
        return a.swapaxes(0, 1).reshape(-1)

    np.testing.assert_array_equal(env_major(mine.buffer.actions), buffer.actions[:, 0])
    np.testing.assert_allclose(mine.buffer.rewards, buffer.rewards, rtol=1e-6)
    np.testing.assert_allclose(env_major(mine.buffer.advantages), buffer.advantages[:, 0],
                               rtol=1e-4, atol=1e-6)  # fmt: skip
    moved = 0.0
    for key, value in _state(mine.policy).items():
        after = theirs.policy.state_dict()[key]
        np.testing.assert_allclose(value.numpy(), after.numpy(), rtol=1e-4, atol=2e-6,
                                   err_msg=key)  # fmt: skip
        moved = max(moved, float((after - start[key]).abs().max()))
    assert moved > 1e-4  # the update did move the weights (so the comparison can fail)
    for env in envs:
        env.close()


def test_sb3_ppo_trains_checkpoints_and_resumes_with_the_lean_learner(tmp_path) -> None:
    out = tmp_path / "run"
    assert sb3_ppo(["coinrun", "--smoke", "--eval-episodes", "0", "--out", str(out),
                    "--checkpoint-every", "128"]) == 0  # fmt: skip
    record = json.loads((out / "checkpoint" / "env.json").read_text())
    assert record["trainer"]["learner"] == "lean"
    assert record["steps"] == 2 * 8 * 16
    updates = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in updates if r["kind"] == "update"] == [128, 256]
    assert (out / "checkpoint-128" / "optimizer.pt").is_file()
    # resume under SB3's own PPO from the lean learner's checkpoint, then back
    assert sb3_ppo(["coinrun", "--smoke", "--eval-episodes", "0", "--out", str(out),
                    "--resume", str(out / "checkpoint"), "--trainer", "sb3"]) == 0  # fmt: skip
    assert json.loads((out / "checkpoint" / "env.json").read_text())["steps"] == 4 * 8 * 16
    assert sb3_ppo(["coinrun", "--smoke", "--eval-episodes", "0", "--out", str(out),
                    "--resume", str(out / "checkpoint")]) == 0  # fmt: skip
    assert json.loads((out / "checkpoint" / "env.json").read_text())["steps"] == 6 * 8 * 16


#: The games whose committed checkpoint an sb3_ppo run with no flags reproduces the setup of
RECIPE_GAMES = "coinrun ninja climber jumper miner heist maze leaper chaser caveflyer".split()


@pytest.mark.parametrize("game", RECIPE_GAMES)
def test_sb3_ppo_game_with_no_flags_trains_the_committed_recipe(game: str, tmp_path) -> None:
    from procgen_entities.agents.checkpoint import Checkpoint

    out = tmp_path / game
    assert sb3_ppo([game, "--smoke", "--eval-episodes", "0", "--out", str(out)]) == 0
    mine = Checkpoint.load(out / "checkpoint")
    committed = Checkpoint.load(REPO / "checkpoints" / game)
    assert mine.env == committed.env  # the whole observation: tilemap, caps, grid, marks
    # --smoke shrinks the rollout (envs, n_steps, batch_size); every other setting is the recipe's
    varies = {"seed", "learner", "envs", "n_steps", "batch_size", "anneal_lr_to"}
    for key, value in committed.trainer.items():
        if key not in varies:
            assert mine.trainer[key] == value, key
    assert ("anneal_lr_to" in mine.trainer) == ("anneal_lr_to" in committed.trainer)
    assert mine.trainer["n_epochs"] == committed.trainer["n_epochs"] == 3


def test_flat_vec_normalize_keeps_vec_normalizes_statistics_bit_for_bit() -> None:
    from procgen_entities.gymnasium.sb3 import FlatVecNormalize

    wrapped = []
    for kind in (VecNormalize, FlatVecNormalize):
        env = SB3VecEnv(make_env(CONFIG, 8, 11, flatten=False))
        wrapped.append(kind(env, gamma=0.999, norm_obs_keys=normalized_keys(env.observation_space)))
    theirs, mine = wrapped
    rng = np.random.default_rng(0)
    a, b = theirs.reset(), mine.reset()
    ends = 0
    for _ in range(1100):  # past procgen's 1,000-step limit: some episodes end
        actions = rng.integers(0, 15, 8)
        for env in wrapped:
            env.step_async(actions)
        a, ra, da, ia = theirs.step_wait()
        b, rb, db, ib = mine.step_wait()
        np.testing.assert_array_equal(ra, rb)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        for i in np.flatnonzero(da):  # the terminal observations, normalised alike
            ends += 1
            for key, value in ia[i]["terminal_observation"].items():
                np.testing.assert_array_equal(value, ib[i]["terminal_observation"][key])
    assert ends > 0
    for key, rms in theirs.obs_rms.items():
        np.testing.assert_array_equal(rms.mean, mine.obs_rms[key].mean, err_msg=key)
        np.testing.assert_array_equal(rms.var, mine.obs_rms[key].var, err_msg=key)
        assert rms.count == mine.obs_rms[key].count
    assert float(np.abs(a["global"]).max()) > 0.1  # real values went through
    for env in wrapped:
        env.close()


def test_separate_value_trains_its_own_cnn_resumes_and_evaluates_in_numpy(tmp_path) -> None:
    """sb3_ppo --separate-value: policy.json says so, the value has a CNN of its own (shared, the
    two names hold one tensor), a resume keeps it without the flag, and the numpy twin (which
    reads the policy's extractor) acts as torch does."""
    from procgen_entities.agents.checkpoint import Checkpoint, load_policy

    out = tmp_path / "run"
    assert sb3_ppo(["climber", "--smoke", "--eval-episodes", "0", "--out", str(out),
                    "--num-levels", "200", "--separate-value"]) == 0  # fmt: skip
    folder = out / "checkpoint"
    assert json.loads((folder / "policy.json").read_text())["share_features_extractor"] is False
    assert Checkpoint.load(folder).trainer["separate_value"] is True
    weights = torch.load(folder / "policy.pt", weights_only=True)
    pi = weights["pi_features_extractor.net.grid.conv.0.weight"]
    vf = weights["vf_features_extractor.net.grid.conv.0.weight"]
    assert pi.shape == vf.shape and not torch.equal(pi, vf)
    assert sb3_ppo(["climber", "--smoke", "--eval-episodes", "0", "--out", str(out),
                    "--resume", str(folder)]) == 0  # fmt: skip
    assert Checkpoint.load(folder).trainer["separate_value"] is True
    assert json.loads((folder / "policy.json").read_text())["share_features_extractor"] is False
    numpy_policy, torch_policy = (load_policy(folder, backend=b) for b in ("numpy", "torch"))
    env = make_env(Checkpoint.load(folder).env, 16, 5, flatten=False)
    obs, _ = env.reset(seed=5)
    for _ in range(40):
        actions = torch_policy(obs)
        np.testing.assert_array_equal(numpy_policy(obs), actions)
        obs, *_ = env.step(actions)
    env.close()
