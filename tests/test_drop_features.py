"""EntityVectorEnv(drop_features=...) (issue 35): an observation without some features, e.g. no
absolute heights. Checked against the full observation of a twin env on the same levels and
actions (the kept columns, masks, globals and image are its own, bit for bit) and against the
numpy reference; checkpoints record it and rebuild it; misuse is refused."""

from __future__ import annotations

from typing import Any, Dict

import numpy as np
import pytest

from procgen_entities.agents.checkpoint import Checkpoint, EnvConfig, make_env
from procgen_entities.errors import UsageError
from procgen_entities.gymnasium.vector import EntityVectorEnv
from procgen_entities.observation_reference import padded_observation
from procgen_entities.parse import parse_states

DROPPED = ("y", "height", "climber_spawn_x")


def _climber(**extra: Any) -> EntityVectorEnv:
    kwargs: Dict[str, Any] = dict(grid=True, grid_entities=True, num_levels=200, seed=4,
                                  autoreset_mode="SameStep")  # fmt: skip
    return EntityVectorEnv.for_training("climber", 8, **{**kwargs, **extra})


def test_the_kept_columns_are_the_full_observations() -> None:
    full, lean = _climber(), _climber(drop_features=DROPPED)
    names, kept_names = full.metadata["feature_names"], lean.metadata["feature_names"]
    assert kept_names["Player"] == ("x", "vx", "vy")
    assert kept_names["Column"] == ("x", "is_lava", "lava_depth", "is_gap", "rel_x", "rel_y")
    assert kept_names["Enemy"] == ("x", "vx", "vy", "rel_x", "rel_y")
    rng = np.random.default_rng(0)
    with full, lean:
        pairs = [(full.reset()[0], lean.reset()[0])]
        for _ in range(200):
            actions = rng.integers(0, 15, 8)
            pairs.append((full.step(actions)[0], lean.step(actions)[0]))
        for a, b in pairs:
            assert a.keys() == b.keys()
            for key in a:
                want = a[key]
                if key in names and key != "global":
                    columns = [names[key].index(f) for f in kept_names[key]]
                    want = want[..., columns]
                np.testing.assert_array_equal(b[key], want, err_msg=key)
        assert lean.single_observation_space["Column"].shape == (16, 6)
        # the numpy reference builds the same observation from the parsed states
        reference, _ = padded_observation(lean, parse_states(lean.stepper.get_states()))
        current = lean.set_states(lean.get_states())
        for key in reference:
            np.testing.assert_array_equal(reference[key], current[key], err_msg=key)


def test_the_flat_form_and_the_checkpoint_record(tmp_path: Any) -> None:
    config = EnvConfig(game="climber", num_levels=200, tilemap="columns", grid=True,
                       drop_features=["y"])  # fmt: skip
    assert "drop_features" not in EnvConfig(game="climber").record()  # old records unchanged
    Checkpoint(env=config).save(tmp_path)
    loaded = Checkpoint.load(tmp_path).env
    assert loaded == config and loaded.record()["drop_features"] == ["y"]
    flat_env, dict_env = make_env(loaded, 4, 0), make_env(loaded, 4, 0, flatten=False)
    with flat_env, dict_env:
        flat, _ = flat_env.reset()
        obs, _ = dict_env.reset()
        assert flat.shape == (4, flat_env.observation_spec.padded_layout.flat_size)
        assert "y" not in dict_env.metadata["feature_names"]["Player"]
        back = flat_env.unflatten(flat)
        for key in obs:
            np.testing.assert_array_equal(back[key], obs[key], err_msg=key)


def test_misuse_is_refused() -> None:
    with pytest.raises(UsageError, match="no entity type's features"):
        _climber(drop_features=["altitude"])
    with pytest.raises(UsageError, match="list of feature names"):
        _climber(drop_features="y")
    with pytest.raises(UsageError, match="leaves Player no features"):
        EntityVectorEnv("maze", 2, drop_features=["x", "y"])


def test_sb3_ppo_trains_and_evaluates_without_the_dropped_features(tmp_path: Any) -> None:
    """sb3_ppo --drop-feature: env.json records them, a resume keeps them, and the numpy
    twin acts on the observation as torch does."""
    pytest.importorskip("stable_baselines3")
    from procgen_entities.agents.checkpoint import load_policy
    from procgen_entities.tools.sb3_ppo import main as sb3_ppo

    out = tmp_path / "run"
    args = ["climber", "--smoke", "--eval-episodes", "0", "--out", str(out), "--num-levels", "200"]
    assert sb3_ppo([*args, "--drop-feature", "y", "--drop-feature", "height"]) == 0
    folder = out / "checkpoint"
    assert Checkpoint.load(folder).env.drop_features == ["y", "height"]
    assert sb3_ppo([*args, "--resume", str(folder)]) == 0
    config = Checkpoint.load(folder).env
    assert config.drop_features == ["y", "height"]
    numpy_policy, torch_policy = (load_policy(folder, backend=b) for b in ("numpy", "torch"))
    with pytest.raises(SystemExit):
        sb3_ppo([*args, "--drop-feature", "altitude"])
    env = make_env(config, 8, 3, flatten=False)
    with env:
        obs, _ = env.reset(seed=3)
        assert "y" not in env.metadata["feature_names"]["Coin"]
        for _ in range(30):
            actions = torch_policy(obs)
            np.testing.assert_array_equal(numpy_policy(obs), actions)
            obs, *_ = env.step(actions)
