"""The core observation object (procgen_entities/observation.py): ObservationSpec's arrays are
the adapters' spaces and observations for every game, its builder is the adapters' builder,
misuse is a UsageError, and the core module needs no RL framework."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any, Dict

import numpy as np
import pytest

from procgen_entities import GAME_NAMES
from procgen_entities.errors import UsageError
from procgen_entities.features import feature_space
from procgen_entities.games import get_game
from procgen_entities.observation import (
    GLOBAL_KEY,
    GRID_KEY,
    MAX_ENTITY_CAP,
    ObservationSpec,
    OutputType,
    PaddedArrays,
    RaggedArrays,
    training_caps,
)
from procgen_entities.tilemap import tile_class_names, tilemap_features

ENVS = 3


def training_options(game: str) -> Dict[str, Any]:
    """EntityVectorEnv.for_training's observation options, as ObservationSpec.padded takes them."""
    info = get_game(game)
    options: Dict[str, Any] = {"tilemap": info.training_tilemap}
    caps = training_caps(info, info.training_tilemap)
    if caps:
        options["max_entities"] = caps
    return options


# ---- against the adapters (live procgen) ----


@pytest.mark.live
@pytest.mark.parametrize("game", GAME_NAMES)
def test_padded_arrays_are_the_gymnasium_space_and_observation(game: str) -> None:
    """For every game (the training observation, with the class image where the game has
    tiles): a spec made apart from the env has the env's space, field for field, and the env's
    observations have the spec's shapes and dtypes."""
    from procgen_entities.gymnasium import EntityVectorEnv

    grid = get_game(game).has_tilemap
    options = {**training_options(game), "grid": grid, "grid_entities": grid}
    with EntityVectorEnv(game, ENVS, seed=4, distribution_mode="easy", **options) as env:
        window = ObservationSpec.window_of(env.stepper.step_values())
        spec = ObservationSpec.padded(game, ENVS, window=window, **options)
        space = env.single_observation_space
        fields = spec.fields()
        assert list(fields) == list(env.observation_spec.fields())
        assert sorted(fields) == sorted(space.spaces)
        for key, field in fields.items():
            box = space[key]
            assert (box.shape, box.dtype) == (field.shape, np.dtype(field.dtype)), key
            assert (box.low == field.low).all() and (box.high == field.high).all(), key
        if grid:
            classes = len(tile_class_names(game)) + len(spec.grid_marks)
            assert fields[GRID_KEY].high == classes == spec.grid_classes
        assert spec.builder_args().types == env.observation_spec.builder_args().types
        obs, _ = env.reset()
        obs, *_ = env.step(np.zeros(ENVS, dtype=np.int64))
        assert list(obs) == list(fields)
        for key, field in fields.items():
            assert obs[key].shape == (ENVS, *field.shape) and obs[key].dtype == field.dtype


@pytest.mark.live
@pytest.mark.parametrize("game", GAME_NAMES)
def test_ragged_features_are_the_entity_gym_space_and_observation(game: str) -> None:
    """For every game (relative positions and the game's tilemap): the ragged spec of the full
    ObsSpace returns every type of it with its features, and ProcgenVecEnv's VecObs holds
    exactly those widths and the spec's own rows per state."""
    from procgen_entities.entity_gym.vec_env import ProcgenVecEnv

    info = get_game(game)
    tilemap = info.training_tilemap or ("tiles" if info.has_tilemap else None)
    with ProcgenVecEnv(game, ENVS, seed=4, relative_positions=True, tilemap=tilemap) as env:
        space = env.obs_space()
        spec = ObservationSpec.ragged(game, space, space, ENVS, tilemap=tilemap)
        assert spec.features == {k: list(e.features) for k, e in space.entities.items()}
        assert spec.names == list(space.entities)
        assert spec.builder.ragged and not env._view_for(space).spec.layout
        obs = env.reset(space)
        arrays = spec.ragged_arrays()
        batch = spec.ragged_batch(env.observe(spec.builder, arrays), arrays)
        for name, features in spec.features.items():
            buffer = obs.features[name]
            assert buffer.size2() == len(features) == batch.rows[name].shape[1], name
            np.testing.assert_array_equal(buffer.size1(), batch.counts[name])
            np.testing.assert_array_equal(buffer.as_array(), batch.rows[name])
        assert batch.globals.shape == (ENVS, len(space.global_features))
        np.testing.assert_array_equal(
            batch.totals[:, 0], sum(batch.counts[name] for name in spec.names)
        )


# ---- the spec alone (no procgen) ----


def test_the_padded_spec_owns_caps_plan_and_builder() -> None:
    spec = ObservationSpec.padded("coinrun", 2, window=13, tilemap="columns", grid=True)
    layout = spec.padded_layout
    assert list(layout.caps) == spec.names == list(spec.features)
    assert spec.names[: len(spec.plan.entity_types)] == spec.plan.entity_types
    args = spec.builder_args()
    assert [t.cap for t in args.types] == list(layout.caps.values())
    assert [t.width for t in args.types] == [len(f) for f in spec.features.values()]
    assert args.ragged is None and args.tiles is not None and args.image_size == 13
    assert spec.builder.n_types == len(args.types) and spec.builder.image_size == 13
    arrays = spec.padded_arrays()
    assert isinstance(arrays, PaddedArrays) and arrays.step is not None
    assert [v.shape for v in arrays.values] == [(2, *spec.fields()[k].shape) for k in spec.names]
    assert arrays.image is not None and arrays.image.shape == (2, 13, 13)
    obs = spec.as_dict(arrays)
    assert list(obs) == list(spec.fields()) and obs[GLOBAL_KEY].dtype == np.float32
    assert all(obs[f"{k}_mask"].dtype == np.bool_ for k in spec.names)
    assert spec.padded_arrays(1, step=False).step is None


def test_the_padded_ranking_follows_the_features() -> None:
    """Relative types rank by their own rel_x/rel_y; without them, by x/y from the Player."""
    relative = ObservationSpec.padded("bigfish", 1, window=20)
    player = relative.builder_args().player
    assert player.type == relative.names.index("Player")
    kinds = dict(zip(relative.names, relative.builder_args().types))
    assert kinds["Fish"] == OutputType(kinds["Fish"].cap, kinds["Fish"].width, *_cols("Fish"))
    absolute = ObservationSpec.padded("bigfish", 1, window=20, relative_positions=False)
    fish = dict(zip(absolute.names, absolute.builder_args().types))["Fish"]
    assert fish.from_player and (fish.cx, fish.cy) == (
        absolute.features["Fish"].index("x"), absolute.features["Fish"].index("y"),
    )  # fmt: skip


def _cols(name: str) -> tuple:
    features = feature_space("bigfish", relative_positions=True).entities[name].features
    return features.index("rel_x"), features.index("rel_y")


def test_the_ragged_spec_returns_the_filters_columns() -> None:
    columns = tilemap_features("coinrun", "columns", window=True)
    full = feature_space("coinrun", relative_positions=True, extra_entities=columns)
    requested = feature_space(
        "coinrun", relative_positions=True, extra_entities={"Column": ["rel_y", "rel_x"]}
    )
    requested.entities.pop("Saw")
    spec = ObservationSpec.ragged("coinrun", full, requested, 2, tilemap="columns")
    assert spec.names == [n for n in requested.entities]
    assert spec.features["Column"] == ["rel_y", "rel_x"]
    args = spec.builder_args()
    assert args.ragged is not None and len(args.ragged) == spec.builder.n_types
    kept = args.ragged[spec.order[spec.names.index("Column")]]
    assert kept is not None and [columns["Column"][c] for c in kept] == ["rel_y", "rel_x"]
    arrays = spec.ragged_arrays()
    assert isinstance(arrays, RaggedArrays) and arrays.counts.shape == (spec.builder.n_types, 2)
    assert arrays.totals.shape == (2, 1)


def test_builds_of_one_kind_refuse_the_other() -> None:
    padded = ObservationSpec.padded("bigfish", 2, window=20)
    space = feature_space("bigfish")
    ragged = ObservationSpec.ragged("bigfish", space, space, 2)
    with pytest.raises(UsageError, match="padded"):
        padded.ragged_arrays()
    with pytest.raises(UsageError, match="ragged"):
        ragged.padded_arrays()
    with pytest.raises(UsageError, match="ragged"):
        ragged.fields()
    with pytest.raises(UsageError, match="ragged build"):
        ragged.ragged_batch(None, ragged.ragged_arrays())


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n": 0}, "n must be >= 1"),
        ({"n": "2"}, "n must be an int"),
        ({"n": True}, "n must be an int"),
        ({"window": 0}, "window must be >= 1"),
        ({"window": 2.5}, "window must be an int"),
        ({"max_entities": 0}, "max_entities must be in"),
        ({"max_entities": MAX_ENTITY_CAP + 1}, "max_entities must be in"),
        ({"max_entities": {"Dragon": 3}}, "no entity types"),
        ({"max_entities": {"Fish": True}}, "must be an int"),
        ({"global_features": ["no_such_global"]}, "unknown global features"),
        ({"grid": True}, "has no tiles"),
        ({"game": "coinrun", "grid_entities": True}, "needs grid=True"),
        ({"game": "coinrun", "grid": True, "grid_boxes": True}, "needs grid_entities=True"),
        ({"grid": True, "grid_entities": True, "grid_boxes": 1}, "grid_boxes must be True"),
        ({"game": "coinrun", "tilemap": "mosaic"}, "mosaic"),
        ({"game": "nosuchgame"}, "nosuchgame"),
    ],
)
def test_bad_padded_arguments_are_usage_errors(kwargs: Dict[str, Any], match: str) -> None:
    arguments: Dict[str, Any] = {"game": "bigfish", "n": 2, "window": 20, **kwargs}
    with pytest.raises(UsageError, match=match):
        ObservationSpec.padded(arguments.pop("game"), arguments.pop("n"), **arguments)


def test_bad_ragged_filters_are_usage_errors() -> None:
    full = feature_space("coinrun", relative_positions=True)
    with pytest.raises(UsageError, match="no entity type 'Dragon'"):
        ObservationSpec.ragged("coinrun", full, _filter(full, Dragon=["x"]), 2)
    with pytest.raises(UsageError, match="no features"):
        ObservationSpec.ragged("coinrun", full, _filter(full, Saw=["x", "colour"]), 2)
    with pytest.raises(UsageError, match="no entity type 'Column'"):  # tiles without a tilemap
        ObservationSpec.ragged("coinrun", full, _filter(full, Column=["x"]), 2)
    with pytest.raises(UsageError, match="n must be >= 1"):
        ObservationSpec.ragged("coinrun", full, full, 0)


def _filter(full: Any, **entities: Any) -> Any:
    from procgen_entities.features import EntityFeatures, FeatureSpace

    chosen = {k: EntityFeatures(list(v)) for k, v in entities.items()}
    return FeatureSpace(global_features=list(full.global_features), entities=chosen)


# ---- the old names and the layers ----


def test_the_old_import_paths_give_the_core_objects() -> None:
    import procgen_entities.gymnasium.observation as old
    import procgen_entities.observation as core

    for name in ("GLOBAL_KEY", "GRID_KEY", "MAX_ENTITY_CAP", "PaddedObservation",
                 "resolve_caps", "tile_caps", "training_caps"):  # fmt: skip
        assert getattr(old, name) is getattr(core, name), name


def test_ragged_observation_formats_the_core_spec() -> None:
    """entity-gym's RaggedObservation keeps its API, over the core's ragged spec."""
    from procgen_entities.entity_gym.observation import RaggedObservation, observation_space

    full = observation_space("coinrun", relative_positions=True)
    view = RaggedObservation(
        get_game("coinrun"), full, full, 2, window=True, tiles=None, actor="player"
    )
    assert isinstance(view.spec, ObservationSpec) and view.builder is view.spec.builder
    assert view.names == list(full.entities) and view.plan.entity_types == view.names
    assert isinstance(view.outputs(), RaggedArrays)
    no_player = observation_space("coinrun")
    no_player.entities.pop("Player")
    with pytest.raises(UsageError, match="actor='player' needs the Player"):
        RaggedObservation(
            get_game("coinrun"), full, no_player, 2, window=True, tiles=None, actor="player"
        )


def test_the_core_observation_imports_no_rl_framework() -> None:
    """ObservationSpec builds with gymnasium, entity-gym, ragged-buffer and torch unimportable."""
    code = textwrap.dedent(
        """
        import sys
        for name in ("gymnasium", "entity_gym", "ragged_buffer", "torch", "gym3"):
            sys.modules[name] = None
        from procgen_entities.observation import ObservationSpec
        spec = ObservationSpec.padded("coinrun", 2, window=13, tilemap="columns")
        assert spec.builder.n_types == len(spec.names)
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# ---- the grid for entity-gym: the tiles mode carries the class image's cells ----


@pytest.mark.parametrize("name", ["coinrun-hard", "maze-easy", "miner-hard", "caveflyer-easy"])
def test_the_tiles_mode_holds_the_class_image(name: str) -> None:
    """Why ProcgenVecEnv offers no image (docs: README, Entity-gym): its ``tilemap="tiles"``
    entities are the class image's cells. Drawn back by their type (class + 1) at their x, y in
    each state's camera square, they give EntityVectorEnv's ``grid`` image exactly."""
    from conftest import load_golden

    from procgen_entities.parse import parse_states
    from procgen_entities.tilemap import tilemap_images, tilemap_to_entities_batch

    golden = load_golden(name)
    batch = parse_states(list(golden.states[:12]))
    assert batch.grid is not None
    keys = ("center_x", "center_y", "view_dim")
    windows = np.stack([np.asarray(batch.scalars[k], dtype=np.float64) for k in keys], axis=1)
    size = int(np.rint(windows[:, 2]).max())
    images = tilemap_images(batch.grid, batch.game, windows=windows, size=size)
    rows, counts = tilemap_to_entities_batch(batch.grid, batch.game, "tiles", windows=windows)
    drawn = np.zeros_like(images)
    classes = tile_class_names(batch.game)
    features = tilemap_features(batch.game, "tiles", window=True)
    for name_, values in rows.items():
        x, y = features[name_].index("x"), features[name_].index("y")
        state = np.repeat(np.arange(len(batch)), counts[name_])
        cells = np.rint(windows[:, 2]).astype(np.int64)  # each state's square, centred in size
        x0 = np.floor(windows[:, 0] - cells / 2 + 0.5).astype(np.int64)
        y0 = np.floor(windows[:, 1] - cells / 2 + 0.5).astype(np.int64)
        col = np.floor(values[:, x]).astype(np.int64) - x0[state] + (size - cells[state]) // 2
        row = size - 1 - (size - cells[state]) // 2 - (np.floor(values[:, y]).astype(np.int64)
                                                       - y0[state])  # fmt: skip
        drawn[state, row, col] = classes.index(name_) + 1
    assert sum(int(c.sum()) for c in counts.values()) == int((images > 0).sum()) > 0
    np.testing.assert_array_equal(drawn, images)
