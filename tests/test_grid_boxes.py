"""grid_boxes=True: each marked entity covers the cells of its box (x ± rx, y ± ry) in the class
image, as procgen's pixels draw it, not only its centre's cell; and the grid of marks alone for
the entity-only games (dodgeball's walls, fruitbot's barriers).

The builder's images are held to the numpy reference (observation_reference.py, from procgen's
own get_state bytes, parsed) every step, and to an independent count: every cell that the
states' boxes cover, computed here from the parsed entities, holds a mark.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np
import pytest

from procgen_entities.agents.checkpoint import EnvConfig
from procgen_entities.errors import UsageError
from procgen_entities.gymnasium import EntityVectorEnv
from procgen_entities.observation_reference import padded_observation
from procgen_entities.parse import parse_states

pytestmark = pytest.mark.live

ENVS = 3
STEPS = 40


def _assert_reference(env: EntityVectorEnv, obs: Dict[str, np.ndarray], at: str) -> None:
    expected, _ = padded_observation(env, parse_states(env.stepper.get_states()))
    assert obs.keys() == expected.keys()
    for key in expected:
        np.testing.assert_array_equal(obs[key], expected[key], err_msg=f"{at}: {key}")


def _covered(env: EntityVectorEnv, kind: str) -> np.ndarray:
    """[n, S, S] bool: the cells the camera square's entities of type ``kind`` cover, from the
    parsed states (each box's cells, x ± rx and y ± ry, in its own state's camera square)."""
    batch = parse_states(env.stepper.get_states(), grid=False)
    tid = {name: t for t, name in env.game.entity_types.items()}[kind]
    size = env.single_observation_space["grid"].shape[0]
    out = np.zeros((len(batch), size, size), dtype=bool)
    for i in range(len(batch)):
        rows = batch.entities[batch.entity_offsets[i] : batch.entity_offsets[i + 1]]
        field = {f: rows[:, batch.entity_fields.index(f)] for f in ("x", "y", "rx", "ry", "type")}
        cx, cy, dim = (float(batch.scalars[k][i]) for k in ("center_x", "center_y", "view_dim"))
        left = np.floor(cx - np.rint(dim) / 2 + 0.5)
        bottom = np.floor(cy - np.rint(dim) / 2 + 0.5)
        for x, y, rx, ry, t in zip(*(field[f] for f in ("x", "y", "rx", "ry", "type"))):
            if t != tid:
                continue
            for col in range(int(np.floor(x - rx)), int(np.ceil(x + rx))):
                for line in range(int(np.floor(y - ry)), int(np.ceil(y + ry))):
                    c, r = col - left, size - 1 - (line - bottom)
                    if 0 <= c < size and 0 <= r < size:
                        out[i, int(r), int(c)] = True
    return out


@pytest.mark.parametrize(
    "game, options",
    [
        ("dodgeball", {}),  # entity-only: the image is the marks alone
        ("fruitbot", {}),
        ("climber", {"tilemap": "columns"}),  # tiles under the boxes
        ("coinrun", {"tilemap": "runs"}),
    ],
)
def test_boxes_are_the_reference(game: str, options: Dict[str, Any]) -> None:
    actions = np.random.default_rng(3).integers(0, 15, (STEPS, ENVS))
    kwargs = dict(grid=True, grid_entities=True, grid_boxes=True, distribution_mode="easy")
    with EntityVectorEnv(game, ENVS, seed=5, **kwargs, **options) as env:
        obs, _ = env.reset()
        _assert_reference(env, obs, f"{game} reset")
        for t in range(STEPS):
            obs, *_ = env.step(actions[t])
            _assert_reference(env, obs, f"{game} step {t}")
        assert int(obs["grid"].max()) <= env.single_observation_space["grid"].high.max()


def test_dodgeball_walls_cover_their_boxes() -> None:
    """Every cell a wall's box covers holds a mark (the wall's, or a larger one where another
    entity stands on it), and the boxes mark more cells than the centres do: the test fails if
    the builder ignored grid_boxes."""
    kwargs = dict(grid=True, grid_entities=True, distribution_mode="easy", seed=11)
    with EntityVectorEnv("dodgeball", ENVS, grid_boxes=True, **kwargs) as boxes, \
            EntityVectorEnv("dodgeball", ENVS, **kwargs) as cells:  # fmt: skip
        wall = 1 + boxes.grid_marks.index("Wall")  # no tile classes: marks start at 1
        assert boxes.observation_spec.grid_classes == len(boxes.grid_marks)
        box_obs, _ = boxes.reset()
        cell_obs, _ = cells.reset()
        covered = _covered(boxes, "Wall")
        assert covered.any()
        assert (box_obs["grid"][covered] >= wall).all()
        assert (box_obs["grid"] == wall).sum() > (cell_obs["grid"] == wall).sum()
        # the centres' image is the boxes' image with only each entity's own cell
        assert ((cell_obs["grid"] > 0) <= (box_obs["grid"] > 0)).all()


def test_entity_only_grid_needs_the_marks() -> None:
    with pytest.raises(UsageError, match="has no tiles"):
        EntityVectorEnv("dodgeball", 2, grid=True)
    with pytest.raises(UsageError, match="needs grid_entities=True"):
        EntityVectorEnv("climber", 2, grid=True, grid_boxes=True)
    with pytest.raises(UsageError, match="grid_boxes must be True or False"):
        EntityVectorEnv("climber", 2, grid=True, grid_entities=True, grid_boxes="yes")


def test_env_json_records_boxes_only_where_set() -> None:
    plain = EnvConfig(game="dodgeball", grid=True, grid_entities=True)
    assert "grid_boxes" not in plain.record()
    boxed = EnvConfig(game="dodgeball", grid=True, grid_entities=True, grid_boxes=True)
    assert boxed.record()["grid_boxes"] is True
    assert boxed.env_kwargs()["grid_boxes"] is True
