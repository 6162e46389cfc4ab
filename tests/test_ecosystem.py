"""The ecosystem's own entry points, used exactly as their users do: Gymnasium's
RecordEpisodeStatistics (vector and single) with its defaults, reset_mask with the DISABLED
autoreset mode, the context manager, entity-gym's act with numpy actions, Stable-Baselines3's
make_vec_env and MultiInputPolicy, TorchRL's GymWrapper and GymEnv, and the CleanRL-style PPO
example (examples/ppo_entities.py)."""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers.vector import RecordEpisodeStatistics

import procgen_entities.gymnasium  # noqa: F401  (registers procgen_entities/<game>-v0)
from procgen_entities.engine import EngineUnavailable
from procgen_entities.gymnasium import EntityVectorEnv

REPO = Path(__file__).resolve().parents[1]


def _random_steps(env: Any, steps: int, seed: int = 0) -> Any:
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        yield env.step(rng.integers(0, 15, env.num_envs))


def test_vector_record_episode_statistics_works_with_its_defaults() -> None:
    """The wrapper's own count equals the env's for every finished episode (bigfish: random
    episodes end within a few hundred steps)."""
    env = RecordEpisodeStatistics(EntityVectorEnv("bigfish", 4, seed=0))
    env.reset(seed=0)
    finished = 0
    for _, _, terminated, truncated, info in _random_steps(env, 600):
        if "episode" in info:
            ended = info["_episode"]
            assert (ended == (terminated | truncated)).all()
            ours = info["episode_stats"]
            assert (info["episode"]["l"][ended] == ours["l"][ended]).all()
            assert np.allclose(info["episode"]["r"][ended], ours["r"][ended])
            finished += int(ended.sum())
    assert finished >= 4 and len(env.length_queue) == finished
    env.close()


def test_stats_key_names_the_envs_own_episode_record() -> None:
    """``stats_key="episode"``: the record under its old name (then without the wrapper)."""
    env = EntityVectorEnv("bigfish", 2, seed=0, stats_key="episode")
    env.reset(seed=0)
    for _, _, terminated, truncated, info in _random_steps(env, 600):
        if (terminated | truncated).any():
            assert (
                "episode_stats" not in info and (info["_episode"] == terminated | truncated).all()
            )
            assert info["episode"]["l"][info["_episode"]].min() >= 1
            break
    else:
        pytest.fail("no episode ended")
    env.close()


def test_single_env_record_episode_statistics_counts_the_episode() -> None:
    env = gym.wrappers.RecordEpisodeStatistics(gym.make("procgen_entities/bigfish-v0"))
    env.reset(seed=3)
    env.action_space.seed(3)
    total, steps = 0.0, 0
    while True:
        _, reward, terminated, truncated, info = env.step(env.action_space.sample())
        total, steps = total + float(reward), steps + 1
        if terminated or truncated:
            break
    assert info["episode"]["l"] == steps and info["episode"]["r"] == pytest.approx(total)
    env.close()


def test_disabled_mode_resets_only_the_masked_envs() -> None:
    """DISABLED + reset_mask: the masked env starts the level NEXT_STEP would have started
    (same seed, same actions), the others are not stepped; then stepping goes on."""
    n = 3
    disabled = EntityVectorEnv("bigfish", n, seed=5, autoreset_mode="Disabled")
    reference = EntityVectorEnv("bigfish", n, seed=5)  # NEXT_STEP
    assert disabled.metadata["autoreset_mode"] == gym.vector.AutoresetMode.DISABLED
    disabled.reset(seed=5)
    reference.reset(seed=5)
    rng = np.random.default_rng(1)
    for _ in range(2000):
        actions = rng.integers(0, 15, n)
        obs, _, terminated, truncated, info = disabled.step(actions)
        ref_obs, *_ = reference.step(actions)
        done = terminated | truncated
        if done.any():
            break
    else:
        pytest.fail("no episode ended")
    assert info["episode_stats"]["l"][done].min() >= 1
    seeds = info["level_seed"].copy()
    reset_obs, reset_info = disabled.reset(options={"reset_mask": done})
    ref_obs, ref_reward, *_ = reference.step(np.zeros(n, dtype=np.int64))  # NEXT_STEP: resets
    for key in obs:
        assert np.array_equal(reset_obs[key][done], ref_obs[key][done]), key
        assert np.array_equal(reset_obs[key][~done], obs[key][~done]), key  # not stepped
    assert (reset_info["level_seed"][~done] == seeds[~done]).all()
    assert (reset_info["level_seed"][done] != seeds[done]).all()
    for _ in range(3):  # the reset envs go on as NEXT_STEP's do
        actions = rng.integers(0, 15, n)
        obs, reward, *_ = disabled.step(actions)
        ref_obs, ref_reward, *_ = reference.step(actions)
        assert np.array_equal(obs["Player"][done], ref_obs["Player"][done])
        assert np.array_equal(reward[done], ref_reward[done])
    with pytest.raises(ValueError, match="bool array of shape"):
        disabled.reset(options={"reset_mask": np.ones(n, dtype=np.int64)})
    with pytest.raises(ValueError, match="seeds all envs together"):
        disabled.reset(seed=1, options={"reset_mask": np.ones(n, dtype=bool)})
    disabled.close()
    reference.close()
    with pytest.raises(EngineUnavailable, match="DISABLED needs the headless engine"):
        EntityVectorEnv("bigfish", 2, engine="get_state", autoreset_mode="Disabled")


def test_record_episode_statistics_with_disabled_mode_and_reset_mask() -> None:
    env = RecordEpisodeStatistics(EntityVectorEnv("bigfish", 2, seed=2, autoreset_mode="Disabled"))
    env.reset(seed=2)
    lengths = []
    for _, _, terminated, truncated, info in _random_steps(env, 1500):
        done = terminated | truncated
        if done.any():
            ended = info["_episode"]
            assert (info["episode"]["l"][ended] == info["episode_stats"]["l"][ended]).all()
            lengths += list(info["episode"]["l"][ended])
            env.reset(options={"reset_mask": done})
    assert len(lengths) >= 2 and list(env.length_queue) == lengths


def test_the_vector_env_is_a_context_manager() -> None:
    with EntityVectorEnv("coinrun", 2, seed=0) as env:
        env.reset(seed=0)
        env.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(RuntimeError, match="closed"):
        env.step(np.zeros(2, dtype=np.int64))


def test_for_training_is_the_recipes_observation() -> None:
    """EntityVectorEnv.for_training gives what sb3_ppo's bare recipe trains on (its env
    config, built the same way; ``--recipe none``: a game's own recipe may add the grid), with
    the recipe's easy mode."""
    pytest.importorskip("stable_baselines3")
    from procgen_entities.agents.checkpoint import make_env
    from procgen_entities.tools.sb3_ppo import _env_config, _parse_args

    for game in ("coinrun", "ninja", "climber", "bigfish"):
        config = _env_config(_parse_args([game, "--recipe", "none"]))
        recipe = make_env(config, 2, 0)
        mine = EntityVectorEnv.for_training(game, 2, flatten=True, seed=0)
        assert mine.single_observation_space == recipe.single_observation_space, game
        assert mine.metadata["entity_caps"] == recipe.metadata["entity_caps"], game
        assert mine.stepper.procgen_options["distribution_mode"] == "easy"
        assert np.array_equal(mine.reset(seed=0)[0], recipe.reset(seed=0)[0]), game
        mine.close()
        recipe.close()
    coinrun = EntityVectorEnv.for_training("coinrun", 1, flatten=True)
    assert coinrun.single_observation_space.shape == (570,)
    coinrun.close()


def test_sb3_ppo_no_grid_takes_the_recipes_image_away() -> None:
    """sb3_ppo --no-grid: climber's recipe (marked grid) observes what the bare recipe does,
    the same entities and tiles with no class image; with --grid it is refused."""
    pytest.importorskip("stable_baselines3")
    from procgen_entities.agents.checkpoint import make_env
    from procgen_entities.tools.sb3_ppo import _env_config, _parse_args

    recipe = _env_config(_parse_args(["climber"]))
    assert recipe.grid and recipe.grid_entities  # what --no-grid has to undo
    config = _env_config(_parse_args(["climber", "--no-grid"]))
    assert config == _env_config(_parse_args(["climber", "--recipe", "none"]))
    env = make_env(config, 2, 0, flatten=False)
    obs = env.reset(seed=0)[0]
    env.close()
    assert "grid" not in obs and "Column" in obs
    with pytest.raises(SystemExit):
        _env_config(_parse_args(["climber", "--no-grid", "--grid-entities"]))


def test_sb3_ppo_grid_size_sizes_the_recipes_image() -> None:
    """sb3_ppo --grid-size: maze's recipe (the marked grid, 29 cells around the player) with
    another size, recorded in env.json's config; refused with no grid."""
    pytest.importorskip("stable_baselines3")
    from procgen_entities.agents.checkpoint import make_env
    from procgen_entities.tools.sb3_ppo import _env_config, _parse_args

    recipe = _env_config(_parse_args(["maze"]))
    assert recipe.grid and recipe.grid_size == 29  # maze's Game.recipe
    config = _env_config(_parse_args(["maze", "--grid-size", "21"]))
    assert config == dataclasses.replace(recipe, grid_size=21)
    env = make_env(config, 2, 0, flatten=False)
    obs = env.reset(seed=0)[0]
    env.close()
    assert obs["grid"].shape == (2, 21, 21)
    with pytest.raises(SystemExit):
        _env_config(_parse_args(["maze", "--no-grid", "--grid-size", "29"]))
    with pytest.raises(SystemExit):
        _env_config(_parse_args(["maze", "--grid-size", "0"]))


def test_sb3_ppo_grid_boxes_marks_the_entity_only_games_boxes() -> None:
    """sb3_ppo --grid-boxes: the grid of marks (boxes) for dodgeball, an entity-only game,
    recorded in env.json's config; refused with --no-grid."""
    pytest.importorskip("stable_baselines3")
    from procgen_entities.agents.checkpoint import make_env
    from procgen_entities.tools.sb3_ppo import _env_config, _parse_args

    config = _env_config(_parse_args(["dodgeball", "--recipe", "none", "--grid-boxes"]))
    assert config.grid and config.grid_entities and config.grid_boxes
    assert config.record()["grid_boxes"] is True
    env = make_env(config, 2, 0, flatten=False)
    obs = env.reset(seed=0)[0]
    env.close()
    assert obs["grid"].shape == (2, 20, 20) and obs["grid"].max() > 0
    with pytest.raises(SystemExit):
        _env_config(_parse_args(["dodgeball", "--no-grid", "--grid-boxes"]))


def test_entity_gym_act_takes_a_numpy_action() -> None:
    pytest.importorskip("entity_gym")
    from ragged_buffer import RaggedBufferI64

    from procgen_entities import ProcgenVecEnv

    actions = np.random.default_rng(0).integers(0, 15, 4)
    results = []
    for given in (actions, RaggedBufferI64.from_array(actions.reshape(4, 1, 1))):
        with ProcgenVecEnv("coinrun", 4, seed=0) as env:
            env.reset(env.obs_space())
            obs = env.act({"move": given}, env.obs_space())
            results.append({k: v.as_array() for k, v in obs.features.items()})
    assert results[0].keys() == results[1].keys()
    for key in results[0]:
        assert np.array_equal(results[0][key], results[1][key]), key


def test_sb3_make_vec_env_without_a_seed_works_every_time() -> None:
    """SB3 draws uint32 seeds (``np.random.randint(2**32 - 1)``); every one must work."""
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env

    for _ in range(20):
        env = make_vec_env("procgen_entities/coinrun-v0", n_envs=4)
        obs = env.reset()
        assert obs["Player"].shape == (4, 1, 4)
        env.close()


def test_sb3_multi_input_policy_learns_on_the_dict_observation() -> None:
    pytest.importorskip("stable_baselines3")
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    env = make_vec_env("procgen_entities/coinrun-v0", n_envs=2, seed=0)
    model = PPO("MultiInputPolicy", env, n_steps=16, batch_size=32, n_epochs=1, seed=0,
                device="cpu")  # fmt: skip
    model.learn(total_timesteps=64)
    assert model.num_timesteps == 64
    actions, _ = model.predict(env.reset(), deterministic=True)
    assert actions.shape == (2,) and ((0 <= actions) & (actions < 15)).all()
    env.close()


TORCHRL_AS_USERS_DO = """
import numpy as np
from torchrl.envs import GymEnv, GymWrapper
from torchrl.envs.libs.gym import gym_backend

from procgen_entities.gymnasium.torchrl import torchrl_env

env = torchrl_env("bigfish", 2, seed=0)
assert isinstance(env, GymWrapper) and gym_backend().__name__ == "gymnasium"
rollout = env.rollout(400, break_when_any_done=False)
assert rollout.batch_size == (2, 400)
done = rollout["next", "done"][..., 0].numpy()
assert done.sum() >= 2, done.sum()
step_fraction = rollout["global"][..., 0].numpy()  # 0 at the first step of a level
for i, t in np.argwhere(done[:, :-1]):
    assert step_fraction[i, t + 1] == 0.0 and rollout["next", "global"][i, t, 0] > 0
env.close()
single = GymEnv("procgen_entities/coinrun-v0")
assert single.rollout(8)["next", "Player"].shape == (8, 1, 4)
single.close()
print("ok")
"""


def test_torchrl_gym_wrapper_and_gym_env() -> None:
    """GymWrapper of the vector env (DISABLED, the mode TorchRL accepts: torchrl_env chooses it;
    TorchRL resets finished envs through reset_mask: the step after an episode's end is the
    next level's first) and GymEnv of the registered id. In a child process: torchrl imports
    ray, which test_rllib's cluster fixture must import first."""
    if importlib.util.find_spec("torchrl") is None:  # not imported here (it imports ray)
        pytest.skip("needs torchrl and tensordict (pip install torchrl)")
    run = subprocess.run([sys.executable, "-c", TORCHRL_AS_USERS_DO], capture_output=True,
                         text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]


def test_the_cleanrl_style_ppo_example_runs(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = REPO / "examples" / "ppo_entities.py"
    run = subprocess.run(
        [sys.executable, str(script), "--game", "coinrun", "--num-envs", "4", "--num-steps", "16",
         "--total-timesteps", "128", "--seed", "1"],  # fmt: skip
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    updates = [line for line in run.stdout.splitlines() if line.startswith("update ")]
    assert len(updates) == 2, run.stdout
    assert "episodic_return" in run.stdout or "no episode" in run.stdout


# ---- quick tries are quick ----


def test_sb3_ppo_evaluates_only_when_asked(tmp_path: Path) -> None:
    pytest.importorskip("stable_baselines3")
    out = tmp_path / "run"
    run = subprocess.run(
        [sys.executable, "-m", "procgen_entities.tools.sb3_ppo", "coinrun", "--steps", "256",
         "--envs", "8", "--ppo", "n_steps=16", "--ppo", "batch_size=64", "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert (out / "checkpoint" / "env.json").is_file()
    assert not (out / "evaluation.json").exists()
    assert f"python -m procgen_entities.evaluate {out / 'checkpoint'}" in run.stdout


def test_evaluate_pins_torch_to_one_thread_and_counts_episodes(
    capsys: pytest.CaptureFixture,
) -> None:
    pytest.importorskip("stable_baselines3")
    import torch
    from tqdm import tqdm

    from procgen_entities.agents.checkpoint import Checkpoint, load_policy
    from procgen_entities.agents.evaluation import run_episodes
    from procgen_entities.tools.evaluate import main

    torch.set_num_threads(2)
    assert (
        main([str(REPO / "checkpoints" / "coinrun"), "--episodes", "3", "--baselines", "none"]) == 0
    )
    assert torch.get_num_threads() == 1
    assert capsys.readouterr().out.strip().splitlines()[-1].endswith("over 3 episodes")
    folder = REPO / "checkpoints" / "coinrun"
    with tqdm(total=5, file=io.StringIO()) as bar:
        # the grid checkpoint takes dicts: run_episodes reads the form off the policy
        run_episodes(Checkpoint.load(folder).env, load_policy(folder), 5, 7, progress=bar)
        assert bar.n == 5
