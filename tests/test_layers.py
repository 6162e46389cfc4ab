"""The package's layers and error mapping: the core imports without the RL stack, ProcgenEnv
holds to entity-gym's own validator, and C statuses become the documented exceptions."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import load_golden

from procgen_entities import StateDecodeError
from procgen_entities.errors import (
    UsageError,
)


def test_core_imports_without_entity_gym() -> None:
    """parse_states, the tilemaps and the engine's layout work with entity-gym, ragged-buffer and
    gym3 made unimportable (as in a venv that lacks them)."""
    state = load_golden("coinrun-hard").states[0]
    code = textwrap.dedent(
        f"""
        import sys
        for name in ("entity_gym", "ragged_buffer", "gym3", "torch"):
            sys.modules[name] = None  # any import of them now fails
        import procgen_entities as pe
        from procgen_entities.engine.layout import load_known_layout, state_program
        batch = pe.parse_states([{state!r}])
        assert batch.entity_counts[0] >= 1
        rows = pe.tilemap_to_entities(batch.grid[0], "coinrun", "columns")
        assert "Column" in rows
        assert len(state_program(load_known_layout(), pe.get_game("coinrun"))) > 0
        try:
            pe.ProcgenVecEnv
        except ImportError:
            print("adapters need entity-gym: ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "adapters need entity-gym: ok" in out.stdout


@pytest.mark.live
@pytest.mark.parametrize("game", ["coinrun", "bossfight", "plunder", "maze"])
def test_procgen_env_passes_entity_gyms_validator(game: str) -> None:
    from entity_gym.env import GlobalCategoricalAction, ValidatingEnv

    from procgen_entities.entity_gym.env import ProcgenEnv

    env = ValidatingEnv(ProcgenEnv(game, seed=3, relative_positions=True))
    obs = env.reset()
    rng = np.random.default_rng(0)
    labels = env.action_space()["move"].index_to_label
    ends = 0
    for _ in range(300):
        k = int(rng.integers(len(labels)))
        obs = env.act({"move": GlobalCategoricalAction(index=k, label=labels[k])})
        if obs.done:
            ends += 1
            obs = env.reset()
    assert obs.features


def test_caller_bugs_are_usage_errors_not_decode_errors() -> None:
    from procgen_entities._native import _collector
    from procgen_entities.parse import game_spec
    from procgen_entities.tilemap import tilemap_to_entities_batch

    collector = _collector.StateCollector(game_spec("coinrun"), 4, 1)
    with pytest.raises(UsageError, match="collect range"):
        collector.collect(1, 1, 8, 0)  # more envs than the collector holds: refused before any call
    with pytest.raises(UsageError, match="shape"):
        collector.fill(np.zeros((3, 60)), np.zeros((4, 5)))
    with pytest.raises(UsageError):
        tilemap_to_entities_batch(np.zeros((1, 4, 4), np.int32), "coinrun", "tiles", chunk=0)
    collector.close()


def test_fill_after_a_failed_collect_reads_nothing() -> None:
    """A collect that fails (here: coinrun states collected as ninja) leaves every state marked
    failed; fill then writes zeros instead of following a broken layout."""
    from procgen_entities._native import _collector
    from procgen_entities.games import get_game
    from procgen_entities.parse import game_spec
    from procgen_entities.procgen_envs import make_procgen_env

    env = make_procgen_env("coinrun", 3, rand_seed=0)
    collector = _collector.StateCollector(game_spec("ninja"), 3, 2)
    handles = (env.get_state_address, env.handle)
    with pytest.raises(StateDecodeError, match="game name"):
        collector.collect(*handles, 3, 0)
    scalars = np.full((3, 60), 7.0)
    trailer = np.full((3, len(get_game("ninja").trailer_scalars)), 7.0)
    collector.fill(scalars, trailer)
    assert not scalars.any() and not trailer.any()
    assert not collector.collected().any()
    collector.close()
    env.close()
