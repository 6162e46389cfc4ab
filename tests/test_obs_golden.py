"""ProcgenVecEnv's observations against the golden ones recorded from real procgen
(tests/data/observations, tools/record_obs_golden.py), bit for bit: every entity type's features
and lengths, the global entity, the order of the types, the action mask's actors, reward, done,
metrics and the ObsSpace, on all 16 games, in each configuration of tests/obs_golden.py (the
default observation, the training one with a tilemap, an obs_filter of it, the unwindowed
player-actor one with deferred resets, and the get_state engine)."""

from __future__ import annotations

from functools import cache
from typing import Dict

import numpy as np
import pytest
from obs_golden import configs, differences, golden_path, load, rollout, split

from procgen_entities import GAME_NAMES

pytestmark = pytest.mark.live

CONFIG_NAMES = ("default", "training", "filter", "wide", "get_state")


@cache
def golden(game: str) -> Dict[str, Dict[str, np.ndarray]]:
    if not golden_path(game).exists():
        pytest.fail(f"no golden observations for {game}: run tools/record_obs_golden.py")
    return split(load(game))


def test_every_game_and_config_is_recorded() -> None:
    for game in GAME_NAMES:
        assert set(golden(game)) == set(CONFIG_NAMES) == set(configs(game)), game


@pytest.mark.parametrize("config", CONFIG_NAMES)
@pytest.mark.parametrize("game", GAME_NAMES)
def test_observations_are_the_golden_ones(game: str, config: str) -> None:
    expected = golden(game)[config]
    warmup = int(expected["warmup"])
    got = split(rollout(game, config, configs(game)[config], warmup))[config]
    found = differences(expected, got)
    assert not found, f"{game} {config}:\n" + "\n".join(found[:20])
    assert expected["done"].any() or expected["warm_done"].any(), "no episode end recorded"
