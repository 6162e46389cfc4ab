"""The entity-native policy (gymnasium/policy.py) and the grid observation, on real procgen."""

from __future__ import annotations

import numpy as np
import pytest

from procgen_entities.games import get_game
from procgen_entities.parse import parse_states
from procgen_entities.tilemap import tile_class_names, tilemap_images

torch = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

from procgen_entities.gymnasium import EntityVectorEnv  # noqa: E402
from procgen_entities.gymnasium.policy import EntityEncoder, encoder_inputs  # noqa: E402

pytestmark = pytest.mark.live


def _obs(game: str = "coinrun", n: int = 6, steps: int = 30, **kwargs):  # type: ignore[no-untyped-def]
    env = EntityVectorEnv(game, n, tilemap="columns", grid=True, seed=3,
                          distribution_mode="easy", **kwargs)  # fmt: skip
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        obs, *_ = env.step(rng.integers(0, 15, n))
    space = env.single_observation_space
    env.close()
    return obs, space


def _encoder(space, **kwargs):  # type: ignore[no-untyped-def]
    types, n_globals, grid = encoder_inputs(space)
    torch.manual_seed(0)
    return EntityEncoder(types, n_globals, grid=grid, **kwargs).eval()


def _tensors(obs):  # type: ignore[no-untyped-def]
    return {k: torch.as_tensor(np.asarray(v, dtype=np.float32)) for k, v in obs.items()}


@pytest.mark.parametrize("layers", [0, 1])
def test_slot_order_does_not_matter(layers: int) -> None:
    obs, space = _obs()
    enc = _encoder(space, n_layers=layers)
    with torch.no_grad():
        base = enc(_tensors(obs))
        rng = np.random.default_rng(1)
        permuted = dict(obs)
        for name in ("Saw", "Crate", "Column", "Wall"):
            order = rng.permutation(obs[name].shape[1])
            permuted[name] = obs[name][:, order]
            permuted[f"{name}_mask"] = obs[f"{name}_mask"][:, order]
        assert not all(np.array_equal(permuted[k], obs[k]) for k in ("Column", "Wall"))
        out = enc(_tensors(permuted))
    np.testing.assert_allclose(out.numpy(), base.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layers", [0, 1])
def test_masked_slots_cannot_change_the_output(layers: int) -> None:
    obs, space = _obs()
    enc = _encoder(space, n_layers=layers)
    with torch.no_grad():
        base = enc(_tensors(obs))
        junk = dict(obs)
        hidden = 0
        for name in ("Saw", "Enemy", "Crate", "Wall", "Lava"):
            values = obs[name].copy()
            masked = ~obs[f"{name}_mask"]
            values[masked] = np.where(np.arange(values.shape[-1]) % 2, np.nan, 1e30)
            hidden += int(masked.sum())
            junk[name] = values
        assert hidden > 0
        out = enc(_tensors(junk))
        # ...while a visible slot does change it (the test can fail)
        moved = dict(obs)
        columns = obs["Column"].copy()
        assert obs["Column_mask"].any()
        columns[obs["Column_mask"]] += 3.0
        moved["Column"] = columns
        changed = enc(_tensors(moved))
    assert torch.isfinite(out).all()
    np.testing.assert_array_equal(out.numpy(), base.numpy())
    assert not np.allclose(changed.numpy(), base.numpy())


def test_grid_is_the_camera_square_of_the_state() -> None:
    """The env's grid observation against an independent crop of the parsed state's grid."""
    env = EntityVectorEnv("coinrun", 4, grid=True, seed=5, distribution_mode="easy")
    obs, _ = env.reset(seed=5)
    rng = np.random.default_rng(2)
    for step in range(40):
        if step % 10 == 9:
            batch = parse_states(env.get_states())
            classes = tile_class_names("coinrun")
            lut = {
                t: c + 1 for c, name in enumerate(classes) for t in get_game("coinrun").tiles[name]
            }
            oob = lut.get(get_game("coinrun").out_of_bounds_tile, 0)
            for i in range(4):
                s = batch.scalars
                size = int(np.rint(s["view_dim"][i]))
                x0 = int(np.floor(s["center_x"][i] - size / 2 + 0.5))
                y0 = int(np.floor(s["center_y"][i] - size / 2 + 0.5))
                grid = batch.grid[i]
                want = np.zeros((size, size), dtype=np.uint8)
                for r in range(size):
                    for c in range(size):
                        y, x = y0 + size - 1 - r, x0 + c
                        inside = 0 <= y < grid.shape[0] and 0 <= x < grid.shape[1]
                        want[r, c] = lut.get(int(grid[y, x]), 0) if inside else oob
                assert obs["grid"].shape[1:] == (size, size)
                np.testing.assert_array_equal(obs["grid"][i], want)
            windows = np.stack([s["center_x"], s["center_y"], s["view_dim"]], 1)
            np.testing.assert_array_equal(
                tilemap_images(batch.grid, "coinrun", windows=windows), obs["grid"]
            )
        obs, *_ = env.step(rng.integers(0, 15, 4))
    assert env.single_observation_space["grid"].contains(obs["grid"][0])
    env.close()


def test_grid_refused_for_entity_games() -> None:
    from procgen_entities.errors import UsageError

    with pytest.raises(UsageError, match="bigfish"):
        EntityVectorEnv("bigfish", 2, grid=True)


@pytest.mark.parametrize("policy", ["attention", "mlp"])
def test_dict_policies_train_resume_and_evaluate(tmp_path, policy: str) -> None:  # type: ignore[no-untyped-def]
    """sb3_ppo --policy P --grid: two tiny updates, a data checkpoint (sb3-multi-1 spec),
    resumed, evaluated (attention: EntityExtractor; mlp: FlatGridExtractor)."""
    import json
    import subprocess
    import sys

    out = tmp_path / "run"
    train = [sys.executable, "-m", "procgen_entities.tools.sb3_ppo", "ninja", "--policy",
             policy, "--grid", "--tilemap", "none", "--smoke", "--out", str(out),
             "--eval-baselines", "none"]  # fmt: skip
    run = subprocess.run(train, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1].endswith("over 16 episodes")
    resumed = subprocess.run([*train, "--resume", str(out / "checkpoint")], capture_output=True,
                             text=True, timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    record = json.loads((out / "checkpoint" / "env.json").read_text())
    assert record["trainer"]["policy"] == policy and record["env"]["grid"] is True
    spec = json.loads((out / "checkpoint" / "policy.json").read_text())
    extractor = {"attention": "EntityExtractor", "mlp": "FlatGridExtractor"}[policy]
    assert spec["format"] == "sb3-multi-1" and spec["extractor"] == extractor
    assert (out / "checkpoint" / "normalizer-dict.npz").is_file()
    assert not any((out / "checkpoint" / name).exists() for name in ("model.zip", "policy.pth"))
    assert record["env"]["tilemap"] is None and record["steps"] == 512
    updates = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert sum(r.get("kind") == "update" for r in updates) >= 2


def test_grid_cnn_stacks() -> None:
    """GridEncoder's stacks on a real climber grid: "small" keeps the committed checkpoints'
    layer names and widths; "deep" reads at 8x8 after a full-resolution layer; others refused."""
    from procgen_entities.gymnasium.policy import GridEncoder

    obs, space = _obs("climber", n=3, steps=10)
    _, _, (values, size) = encoder_inputs(space)
    image = torch.as_tensor(obs["grid"])
    small = GridEncoder(values, size)
    assert [tuple(p.shape) for p in small.state_dict().values()] == [
        (16, values, 3, 3), (16,), (32, 16, 3, 3), (32,), (64, 32 * 4 * 4), (64,)]  # fmt: skip
    assert list(small.state_dict()) == [
        "conv.0.weight", "conv.0.bias", "conv.2.weight", "conv.2.bias",
        "head.0.weight", "head.0.bias"]  # fmt: skip
    deep = GridEncoder(values, size, None, cnn="deep")
    assert deep.head[0].in_features == 32 * (size // 2) ** 2 and deep.out_dim == 256
    assert deep(image).shape == (3, 256) and small(image).shape == (3, 64)
    with pytest.raises(ValueError, match="cnn must be one of"):
        GridEncoder(values, size, cnn="resnet")


def _adam_rate(folder):  # type: ignore[no-untyped-def]
    state = torch.load(folder / "optimizer.pt", map_location="cpu", weights_only=True)
    return state["param_groups"][0]["lr"]


def test_a_deep_cnn_marked_grid_run_resumes_and_needs_torch(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """sb3_ppo --grid-entities --grid-cnn deep --anneal-lr: env.json records the marked grid and
    the schedule, policy.json the stack; a resumed run keeps all three whatever the flags say
    (its rate reaches 0 at the first run's --steps); the loaded policy's env has the marks'
    values; the numpy backend (small stack only) refuses the deep stack by name."""
    import json
    import subprocess
    import sys

    from procgen_entities.agents.checkpoint import (
        Checkpoint,
        CheckpointError,
        load_policy,
        make_env,
    )

    out = tmp_path / "run"
    train = [sys.executable, "-m", "procgen_entities.tools.sb3_ppo", "climber",
             "--grid-entities", "--grid-cnn", "deep", "--smoke", "--out", str(out),
             "--eval-baselines", "none", "--anneal-lr", "--steps", "300", "--ppo",
             "learning_rate=0.001"]  # fmt: skip
    run = subprocess.run(train, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    # --anneal-lr: 0 at --steps 300 (the smoke run stops at 256): the last update's rate
    assert _adam_rate(out / "checkpoint") == pytest.approx(0.001 * (1 - 256 / 300))
    plain = [*train[:4], "--smoke", "--out", str(out), "--eval-baselines", "none"]
    resumed = subprocess.run([*plain, "--resume", str(out / "checkpoint")],
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    spec = json.loads((out / "checkpoint" / "policy.json").read_text())
    assert spec["extractor"] == "FlatGridExtractor" and spec["extractor_kwargs"] == {"cnn": "deep"}
    record = json.loads((out / "checkpoint" / "env.json").read_text())
    assert record["trainer"]["grid_cnn"] == "deep" and record["steps"] == 512
    assert record["trainer"]["anneal_lr_to"] == 300 and _adam_rate(out / "checkpoint") == 0.0
    assert record["env"]["grid"] is True and record["env"]["grid_entities"] is True
    policy = load_policy(out / "checkpoint", backend="torch")
    assert policy.flatten is False
    env = make_env(Checkpoint.load(out / "checkpoint").env, 2, seed=0, flatten=False)
    assert env.grid_marks == ("Coin", "Enemy", "Player")
    assert env.single_observation_space["grid"].high.max() == 1 + 3  # Wall, then the marks
    obs, _ = env.reset()
    assert policy(obs).shape == (2,)
    env.close()
    with pytest.raises(CheckpointError, match="'deep' CNN needs torch"):
        load_policy(out / "checkpoint", backend="numpy")
