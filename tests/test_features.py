"""Observation features that are computed, not stored: checked against procgen itself."""

from __future__ import annotations

import numpy as np
import pytest

from procgen_entities.features import batch_footing, on_ground
from procgen_entities.games import GAMES
from procgen_entities.observation_reference import batch_values
from procgen_entities.parse import parse_states
from procgen_entities.stepper import ProcgenStepper

PLATFORMERS = sorted(g.name for g in GAMES.values() if g.support is not None)


def test_the_platformers_declare_support() -> None:
    assert PLATFORMERS == ["climber", "coinrun", "jumper", "ninja"]


@pytest.mark.parametrize("engine", ["headless", "get_state"])
@pytest.mark.parametrize("game", PLATFORMERS)
def test_on_ground_is_what_procgen_computes_at_the_next_step(game: str, engine: str) -> None:
    """procgen stores has_support as computed at the start of the step that made the state;
    on_ground, read from a state (the footing of its parsed bytes), must equal the has_support
    procgen stores one step later (every step that did not end an episode). The native builder's
    on_ground is held to this one bit for bit (tests/test_observation.py)."""
    stepper = ProcgenStepper(game, 16, engine=engine, seed=3, distribution_mode="easy")
    stepper.restart()
    rng = np.random.default_rng(0)

    def on_ground_now() -> np.ndarray:
        return on_ground(stepper.game, batch_values(parse_states(stepper.get_states(), game=game)))

    predicted = on_ground_now()
    compared = stale = 0
    for t in range(300):
        stepper.step(rng.integers(0, 9, 16).astype(np.int32))
        values = stepper.step_values()
        stored = values.extras["has_support"] != 0
        live = values.scalars["done"] == 0
        np.testing.assert_array_equal(predicted[live] != 0, stored[live], err_msg=f"step {t}")
        compared += int(live.sum())
        current = on_ground_now()
        stale += int(((current != 0) != stored).sum())
        predicted = current
    stepper.close()
    assert compared > 4000
    assert stale > 0  # the stored value really is late on some steps (else this tests nothing)


def test_the_stepper_leaves_the_footing_to_parsed_states() -> None:
    """The stepper's StepValues carry no footing (the builder computes on_ground in C);
    batch_footing gives it of parsed states, NaN-free for states with a player."""
    with ProcgenStepper("coinrun", 2, seed=1) as stepper:
        stepper.restart()
        assert stepper.step_values().footing is None
        footing = batch_footing(parse_states(stepper.get_states()))
        assert footing.shape == (2, 3) and np.isfinite(footing).all()
