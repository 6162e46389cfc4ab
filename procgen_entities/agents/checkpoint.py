"""Checkpoints of agents trained on EntityVectorEnv: a folder of data that rebuilds its own env.

A checkpoint folder holds only data; loading it never runs code from it (no pickle):

- ``env.json``: the game and every EntityVectorEnv keyword it was trained with, the trainer
  settings and the env steps done. Everything that evaluates, watches or resumes a checkpoint
  builds its env from it, so an agent always sees the observation it was trained on.
- ``policy.json``: the network's architecture (an SB3 ActorCriticPolicy with an MLP: layer
  sizes, activation, observation size, number of actions).
- ``policy.pt``: its weights, a state dict (``torch.load(..., weights_only=True)``), and
  ``policy.npz``: the same arrays for numpy (agents/numpy_policy.py: inference without torch).
- ``normalizer.npz`` when observations were normalised: SB3 VecNormalize's statistics and
  settings (observation mean, variance, count, clip, epsilon; the return statistics).
- ``optimizer.pt`` (training runs only, not the committed checkpoints): Adam's state dict,
  what ``tools/sb3_ppo.py --resume`` continues with.

Folders from before this format hold pickles (``vecnormalize.pkl``, ``policy.pth``,
``model.zip``), which can run arbitrary code when loaded; they are refused, with the one command
that converts a folder whose source you trust (enn-trainer checkpoints, ``DIR/enn``, are
hyperstate's msgpack and ron files; pickled files in them are refused)::

    python -m procgen_entities.tools.checkpoint convert DIR --trust-pickle [--remove-pickles]

The conversion checks that the converted policy gives the same logits (bit for bit under torch)
and the normaliser the same observations as the pickled ones.
"""

from __future__ import annotations

import importlib.util
import json
import zipfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from procgen_entities.agents.numpy_policy import (
    ACTIVATIONS,
    DICT_NORMALIZER_FILE,
    MAX_ARRAYS,
    MAX_VALUES,
    NORMALIZER_FILE,
    DictNormalizer,
    FlatGridPolicy,
    MlpPolicy,
    Normalizer,
    choose_actions,
    read_npz,
)
from procgen_entities.errors import ProcgenEntitiesError, UsageError
from procgen_entities.files import open_regular

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "CheckpointPolicy",
    "EnvConfig",
    "MAX_HIDDEN_LAYERS",
    "MAX_LAYER_WIDTH",
    "NotACheckpoint",
    "PICKLED_FILES",
    "build_sb3_policy",
    "convert",
    "declared_values",
    "load_normalizer",
    "load_policy",
    "make_env",
    "policy_kwargs_of",
    "read_spec",
    "save_sb3",
    "torch_logits",
    "wants_dict_observation",
]

POLICY_SPEC, POLICY_TORCH, POLICY_NUMPY = "policy.json", "policy.pt", "policy.npz"
OPTIMIZER = "optimizer.pt"
#: The files of the old format (loading them runs pickle).
PICKLED_FILES = ("vecnormalize.pkl", "policy.pth", "model.zip")
CONVERT = "python -m procgen_entities.tools.checkpoint convert"
SPEC_FORMAT = "sb3-mlp-1"
#: policy.json of a MultiInputPolicy on the dict form with one of gymnasium/sb3.py's extractors
#: (torch only; the observation space comes from the checkpoint's env).
MULTI_SPEC_FORMAT = "sb3-multi-1"
EXTRACTORS = ("EntityExtractor", "FlatGridExtractor")
#: The keywords policy.json's "extractor_kwargs" may give each extractor.
EXTRACTOR_KEYWORDS = {
    "FlatGridExtractor": ("grid_dim", "cnn"),
    "EntityExtractor": ("d_model", "n_heads", "n_layers", "n_queries", "grid_dim"),
}
#: The most a policy.json may declare (a checkpoint is data: loading it must not build a network
#: that takes minutes or gigabytes; net_arch [12000, 12000] took minutes under torch): layers of
#: at most MAX_LAYER_WIDTH units, at most MAX_HIDDEN_LAYERS of them per net (and transformer
#: layers), and a network of at most numpy_policy.MAX_VALUES values (2**24, 64 MiB of float32)
#: in its state dict, counted before anything is built (gymnasium/sizes.py).
MAX_LAYER_WIDTH = 4096
MAX_HIDDEN_LAYERS = 8


class CheckpointError(ProcgenEntitiesError, ValueError):
    """A checkpoint folder that cannot be loaded; the message is one line that says why."""


class NotACheckpoint(CheckpointError, FileNotFoundError):
    """A folder without env.json."""


@dataclass
class EnvConfig:
    """What EntityVectorEnv is built with (the observation, the level distribution)."""

    game: str
    distribution_mode: str = "easy"
    num_levels: int = 0
    start_level: int = 0
    tilemap: Optional[str] = None
    entity_window: bool = True
    global_features: Optional[list] = None
    max_entities: Optional[Dict[str, int]] = None
    grid: bool = False  # the camera square's class image (EntityVectorEnv(grid=True))
    grid_entities: bool = False  # the entities' cells marked in it (EntityVectorEnv)
    drop_features: Optional[list] = None  # entity features left out (EntityVectorEnv)
    grid_centre: str = "camera"  # where the class image is centred (EntityVectorEnv)
    grid_size: Optional[int] = None  # its cells a side, None: the camera square's (EntityVectorEnv)
    grid_boxes: bool = False  # the marks cover the entities' boxes (EntityVectorEnv)

    def env_kwargs(self) -> Dict[str, Any]:
        kwargs = asdict(self)
        kwargs.pop("game")
        return kwargs

    def record(self) -> Dict[str, Any]:
        """What env.json's "env" holds: every field, but ``drop_features``, ``grid_centre``,
        ``grid_size`` and ``grid_boxes`` only where set (so the records of runs without them
        stay what they were)."""
        record = asdict(self)
        if record["drop_features"] is None:
            record.pop("drop_features")
        if record["grid_centre"] == "camera":
            record.pop("grid_centre")
        if record["grid_size"] is None:
            record.pop("grid_size")
        if not record["grid_boxes"]:
            record.pop("grid_boxes")
        return record


def make_env(
    config: EnvConfig, num_envs: int, seed: int, *, flatten: bool = True, **overrides: Any
) -> Any:
    """EntityVectorEnv of a config (the flat form and same-step resets SB3 wants by default)."""
    from procgen_entities.gymnasium import EntityVectorEnv

    kwargs = {**config.env_kwargs(), "autoreset_mode": "SameStep", **overrides}
    return EntityVectorEnv(config.game, num_envs, seed=seed, flatten=flatten, **kwargs)


def _env_config(record: Any, path: Path) -> EnvConfig:
    from procgen_entities.games import GAME_NAMES

    if not isinstance(record, dict) or not isinstance(record.get("env"), dict):
        raise CheckpointError(f'{path} has no "env" object (the game and its env keywords)')
    env = record["env"]
    known = {f.name for f in fields(EnvConfig)}
    unknown = sorted(set(env) - known)
    if unknown or "game" not in env:
        what = f"unknown keys {', '.join(unknown)}" if unknown else 'no "game"'
        raise CheckpointError(f'{path}: "env" has {what} (expected {", ".join(sorted(known))})')
    if env["game"] not in GAME_NAMES:
        raise CheckpointError(f"{path}: unknown game {env['game']!r}")
    return EnvConfig(**env)


@dataclass
class Checkpoint:
    """A checkpoint folder's ``env.json``."""

    env: EnvConfig
    steps: int = 0
    normalize: bool = False
    trainer: Dict[str, Any] = field(default_factory=dict)

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        record = {"env": self.env.record(), "steps": self.steps, "normalize": self.normalize,
                  "trainer": self.trainer}  # fmt: skip
        (folder / "env.json").write_text(json.dumps(record, indent=1) + "\n")

    @classmethod
    def load(cls, folder: Path) -> "Checkpoint":
        """``folder/env.json``; NotACheckpoint without one, CheckpointError if it is corrupt."""
        path = Path(folder) / "env.json"
        if not path.is_file():
            raise NotACheckpoint(f"{folder} is not a checkpoint folder (no env.json)")
        try:
            record = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise CheckpointError(f"{path} is not readable JSON ({exc})") from None
        config = _env_config(record, path)
        try:
            return cls(
                env=config,
                steps=int(record.get("steps", 0)),
                normalize=bool(record.get("normalize", False)),
                trainer=dict(record.get("trainer", {})),
            )
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"{path}: bad steps or trainer record ({exc})") from None


def wants_dict_observation(folder: Path) -> bool:
    """An enn-trainer checkpoint (RogueNet) and an SB3 one with the entity encoder
    (``trainer["policy"] == "attention"``) read the padded dict form, an SB3 MLP the flat form."""
    from procgen_entities.agents.enn_policy import ENN_FOLDER

    if (Path(folder) / ENN_FOLDER).is_dir():
        return True
    return _sb3_reads_dicts(Checkpoint.load(Path(folder)))


def _sb3_reads_dicts(checkpoint: Checkpoint) -> bool:
    """An SB3 checkpoint's policy reads the dict form (the grid, or the entity encoder)."""
    return checkpoint.env.grid or checkpoint.trainer.get("policy", "mlp") == "attention"


# ---- the SB3 policy and normaliser as data ----


def _policy_spec(policy: Any) -> Dict[str, Any]:
    """policy.json of an SB3 ActorCriticPolicy; UsageError for what the format cannot rebuild."""
    from gymnasium import spaces
    from stable_baselines3.common.torch_layers import FlattenExtractor

    obs, act = policy.observation_space, policy.action_space
    if isinstance(obs, spaces.Dict):
        return _multi_spec(policy)
    if not (
        isinstance(obs, spaces.Box) and len(obs.shape) == 1 and isinstance(act, spaces.Discrete)
    ):
        raise UsageError("only flat Box observations and Discrete actions are supported")
    if policy.features_extractor_class is not FlattenExtractor or policy.use_sde:
        raise UsageError("only SB3's MlpPolicy (FlattenExtractor, no gSDE) is supported")
    names = {cls.__name__.lower(): name for name, cls in _torch_activations().items()}
    activation = names.get(policy.activation_fn.__name__.lower())
    if activation is None:
        raise UsageError(f"unsupported activation {policy.activation_fn.__name__}")
    return {
        "format": SPEC_FORMAT,
        "observation_size": int(obs.shape[0]),
        "actions": int(act.n),
        "net_arch": policy.net_arch,
        "activation": activation,
        "share_features_extractor": bool(policy.share_features_extractor),
        "ortho_init": bool(policy.ortho_init),
    }


def _multi_spec(policy: Any) -> Dict[str, Any]:
    name = policy.features_extractor_class.__name__
    if name not in EXTRACTORS or policy.use_sde:
        raise UsageError(f"dict observations: only the extractors {', '.join(EXTRACTORS)}")
    names = {cls.__name__.lower(): n for n, cls in _torch_activations().items()}
    return {
        "format": MULTI_SPEC_FORMAT,
        "extractor": name,
        "extractor_kwargs": dict(policy.features_extractor_kwargs),
        "actions": int(policy.action_space.n),
        "net_arch": policy.net_arch,
        "activation": names[policy.activation_fn.__name__.lower()],
        "share_features_extractor": bool(policy.share_features_extractor),
        "ortho_init": bool(policy.ortho_init),
    }


def _torch_activations() -> Dict[str, Any]:
    from torch import nn

    return {"tanh": nn.Tanh, "relu": nn.ReLU}


def save_sb3(folder: Path, policy: Any, normalizer: Any = None,
             optimizer: bool = False) -> None:  # fmt: skip
    """Write an SB3 ActorCriticPolicy (and the normaliser's statistics, and with ``optimizer``
    the policy's Adam state) into ``folder`` in the data format."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    spec = _policy_spec(policy)
    state = {k: v.detach().cpu().clone() for k, v in policy.state_dict().items()}
    (folder / POLICY_SPEC).write_text(json.dumps(spec, indent=1) + "\n")
    torch.save(state, folder / POLICY_TORCH)
    np.savez(folder / POLICY_NUMPY, **{k: v.numpy() for k, v in state.items()})
    if normalizer is not None:
        dict_form = isinstance(normalizer, DictNormalizer)
        normalizer.save(folder / (DICT_NORMALIZER_FILE if dict_form else NORMALIZER_FILE))
    if optimizer:
        torch.save(policy.optimizer.state_dict(), folder / OPTIMIZER)


def _refuse_pickles(folder: Path) -> None:
    pickled = [name for name in PICKLED_FILES if (folder / name).exists()]
    if pickled:
        raise CheckpointError(
            f"{folder} is in the old pickled format ({', '.join(pickled)}), which can run code "
            f"when loaded; if you trust its source, convert it once: {CONVERT} {folder} "
            "--trust-pickle"
        )
    raise CheckpointError(f"{folder} has no {POLICY_SPEC} (the policy's architecture)")


def read_spec(folder: Path) -> Dict[str, Any]:
    """``folder/policy.json``; CheckpointError (saying how to convert) for the old format."""
    path = folder / POLICY_SPEC
    if not path.is_file():
        _refuse_pickles(folder)
    try:
        spec = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{path} is not readable JSON ({exc})") from None
    if not isinstance(spec, dict) or spec.get("format") not in (SPEC_FORMAT, MULTI_SPEC_FORMAT):
        raise CheckpointError(f'{path}: expected "format": "{SPEC_FORMAT}"')
    if spec["format"] == MULTI_SPEC_FORMAT and spec.get("extractor") not in EXTRACTORS:
        raise CheckpointError(f"{path}: unknown extractor {spec.get('extractor')!r}")
    if spec.get("activation") not in ACTIVATIONS:
        raise CheckpointError(f"{path}: unknown activation {spec.get('activation')!r}")
    _check_number(path, "actions", spec.get("actions"), 1, MAX_LAYER_WIDTH)
    if spec["format"] == SPEC_FORMAT:
        _check_number(path, "observation_size", spec.get("observation_size"), 1, MAX_VALUES)
    _check_arch(path, spec.get("net_arch"))
    if spec["format"] == MULTI_SPEC_FORMAT:
        _check_extractor(path, spec["extractor"], spec.get("extractor_kwargs"))
    return spec


def _check_number(path: Path, key: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise CheckpointError(f"{path}: {key} {value!r:.40} is not a whole number in "
                              f"{low}..{high}")  # fmt: skip


def _check_arch(path: Path, arch: Any) -> None:
    """net_arch: a list of layer widths, or a dict of "pi" and "vf" lists (SB3's forms), each
    of at most MAX_HIDDEN_LAYERS widths of at most MAX_LAYER_WIDTH."""
    nets = {f"net_arch.{k}": v for k, v in arch.items()} if isinstance(arch, dict) else {
        "net_arch": arch}  # fmt: skip
    if isinstance(arch, dict) and not set(arch) <= {"pi", "vf"}:
        raise CheckpointError(f'{path}: net_arch has keys other than "pi" and "vf"')
    for key, widths in nets.items():
        if not isinstance(widths, list) or len(widths) > MAX_HIDDEN_LAYERS:
            raise CheckpointError(f"{path}: {key} is not a list of at most {MAX_HIDDEN_LAYERS} "
                                  f"layer widths ({widths!r:.60})")  # fmt: skip
        for i, width in enumerate(widths):
            _check_number(path, f"{key}[{i}]", width, 1, MAX_LAYER_WIDTH)


def _check_extractor(path: Path, extractor: str, kwargs: Any) -> None:
    """extractor_kwargs: the extractor's own keywords, sizes within the limits."""
    from procgen_entities.gymnasium.sizes import GRID_CNNS

    allowed = EXTRACTOR_KEYWORDS[extractor]
    if kwargs is None:
        return
    if not isinstance(kwargs, dict) or not set(kwargs) <= set(allowed):
        raise CheckpointError(f"{path}: extractor_kwargs {kwargs!r:.80} (the keywords of "
                              f"{extractor}: {', '.join(allowed)})")  # fmt: skip
    for key, value in kwargs.items():
        if key == "cnn" and value not in GRID_CNNS:
            raise CheckpointError(f"{path}: extractor_kwargs cnn {value!r:.40} is not one of "
                                  f"{', '.join(GRID_CNNS)}")  # fmt: skip
        elif key == "n_layers":
            _check_number(path, f"extractor_kwargs {key}", value, 0, MAX_HIDDEN_LAYERS)
        elif key != "cnn" and not (key == "grid_dim" and value is None):
            _check_number(path, f"extractor_kwargs {key}", value, 1, MAX_LAYER_WIDTH)
    heads, width = kwargs.get("n_heads", 4), kwargs.get("d_model", 64)
    if extractor == "EntityExtractor" and width % heads:
        raise CheckpointError(f"{path}: extractor_kwargs n_heads {heads} does not divide "
                              f"d_model {width}")  # fmt: skip


def declared_values(folder: Path, spec: Dict[str, Any], space: Any) -> int:
    """The values of the state dict ``spec`` declares for the observation ``space`` the
    checkpoint's env builds; CheckpointError above numpy_policy.MAX_VALUES (before anything
    is built or read)."""
    from procgen_entities.gymnasium.sizes import policy_values

    multi = spec["format"] == MULTI_SPEC_FORMAT
    try:
        values = policy_values(spec["extractor"] if multi else None,
                               spec.get("extractor_kwargs") or {}, spec["net_arch"],
                               int(spec["actions"]), space)  # fmt: skip
    except ValueError as exc:
        raise CheckpointError(f"{folder / POLICY_SPEC}: {exc}") from None
    if values > MAX_VALUES:
        raise CheckpointError(f"{folder / POLICY_SPEC}: its network holds {values:,} values for "
                              f"the observation env.json builds, more than the {MAX_VALUES:,} a "
                              f"checkpoint may (net_arch {spec['net_arch']})")  # fmt: skip
    return values


def _refuse_nonfinite(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """CheckpointError naming ``path`` and the first array holding NaN or infinity, or a
    negative variance (normalizer files: ``obs_var``, ``ret_var``, ``var:KEY``). numpy's
    argmax of NaN logits is action 0 every step; torch's sampling raises deep in a step."""
    for name, values in arrays.items():
        if values.dtype.kind in "fc" and not np.isfinite(values).all():
            what = "NaN" if np.isnan(values).any() else "infinity"
            raise CheckpointError(f"{path}: array {name!r} holds {what}")
        variance = name in ("obs_var", "ret_var") or name.startswith("var:")
        if variance and values.dtype.kind in "fi" and (values < 0).any():
            raise CheckpointError(f"{path}: array {name!r} holds a negative variance")


def load_normalizer(folder: Path) -> Any:
    """The observation normaliser: ``Normalizer`` (flat) or ``DictNormalizer`` (dict form);
    CheckpointError for a missing or unreadable file, or statistics that are not finite."""
    path = folder / DICT_NORMALIZER_FILE
    loader: Any = DictNormalizer
    if not path.is_file():
        path, loader = folder / NORMALIZER_FILE, Normalizer
    if not path.is_file():
        if (folder / "vecnormalize.pkl").exists():
            _refuse_pickles(folder)
        raise CheckpointError(
            f"{folder}: env.json says normalised, but {NORMALIZER_FILE} is missing"
        )
    try:
        normalizer = loader.load(path)
        _refuse_nonfinite(path, read_npz(path))
    except ValueError as exc:  # CheckpointError is one too
        raise CheckpointError(str(exc)) from None
    return normalizer


def _torch_state(folder: Path, values: int = MAX_VALUES) -> Dict[str, Any]:
    """policy.pt (policy.npz without one), at most ``values`` values: its records' sizes are
    checked before torch reads them."""
    import torch

    path = folder / POLICY_TORCH
    if not path.is_file():
        arrays = _numpy_state(folder, values)
        return {k: torch.from_numpy(v) for k, v in arrays.items()}
    try:
        with open_regular(path) as file:
            _check_torch_file(path, file, values)
            file.seek(0)
            state = torch.load(file, map_location="cpu", weights_only=True)
    except CheckpointError:
        raise
    except Exception as exc:  # torch raises many kinds for a bad file
        raise CheckpointError(f"{path} is not a weights-only state dict ({exc})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} is not a state dict (it holds a {type(state).__name__})")
    for name, tensor in state.items():
        if torch.is_tensor(tensor) and tensor.is_floating_point():
            if not bool(torch.isfinite(tensor).all()):
                what = "NaN" if bool(torch.isnan(tensor).any()) else "infinity"
                raise CheckpointError(f"{path}: array {name!r} holds {what}")
    return state  # type: ignore[no-any-return]


def _check_torch_file(path: Path, file: Any, values: int) -> None:
    """CheckpointError unless ``file`` is torch.save's zip whose records decompress to no more
    than ``values`` values of 8 bytes (and 1 MiB of pickle and metadata)."""
    try:
        with zipfile.ZipFile(file) as archive:
            infos = archive.infolist()
    except zipfile.BadZipFile as exc:
        raise CheckpointError(f"{path} is not torch.save's zip format ({exc})") from None
    size = sum(info.file_size for info in infos)
    if len(infos) > MAX_ARRAYS or size > 8 * values + 2**20:
        raise CheckpointError(f"{path}: {len(infos)} records of {size:,} bytes, more than the "
                              f"{values:,} values of policy.json's network take")  # fmt: skip


def _numpy_state(folder: Path, values: int = MAX_VALUES) -> Dict[str, np.ndarray]:
    """policy.npz, at most ``values`` values (sizes checked before it is decompressed)."""
    path = folder / POLICY_NUMPY
    if not path.is_file():
        raise CheckpointError(f"{folder} has neither {POLICY_TORCH} nor {POLICY_NUMPY}")
    try:
        arrays = read_npz(path, max_values=values)
    except ValueError as exc:
        raise CheckpointError(str(exc)) from None
    _refuse_nonfinite(path, arrays)
    return arrays


def policy_kwargs_of(spec: Dict[str, Any]) -> Tuple[str, Dict[str, Any]]:
    """(SB3's policy name, its policy_kwargs) that build the network ``policy.json`` describes:
    for evaluation (build_sb3_policy) and for resuming a run (tools/sb3_ppo.py)."""
    kwargs: Dict[str, Any] = dict(
        net_arch=spec["net_arch"],
        activation_fn=_torch_activations()[spec["activation"]],
        ortho_init=bool(spec.get("ortho_init", True)),
        share_features_extractor=bool(spec.get("share_features_extractor", True)),
    )
    if spec["format"] != MULTI_SPEC_FORMAT:
        return "MlpPolicy", kwargs
    from procgen_entities.gymnasium import sb3

    kwargs["features_extractor_class"] = getattr(sb3, spec["extractor"])
    kwargs["features_extractor_kwargs"] = dict(spec.get("extractor_kwargs") or {})
    return "MultiInputPolicy", kwargs


def build_sb3_policy(
    spec: Dict[str, Any], state: Dict[str, Any], observation_space: Any = None
) -> Any:
    """An SB3 ActorCriticPolicy of ``spec`` with the weights ``state`` (eval mode, CPU);
    ``observation_space``: the env's Dict space, for a ``sb3-multi-1`` spec."""
    from gymnasium import spaces
    from stable_baselines3.common.policies import ActorCriticPolicy, MultiInputActorCriticPolicy

    name, kwargs = policy_kwargs_of(spec)
    actions: Any = spaces.Discrete(int(spec["actions"]))
    policy: Any
    if name == "MultiInputPolicy":
        policy = MultiInputActorCriticPolicy(observation_space, actions, lambda _: 0.0, **kwargs)
    else:
        size = int(spec["observation_size"])
        box = spaces.Box(-np.inf, np.inf, (size,), np.float32)
        policy = ActorCriticPolicy(box, actions, lambda _: 0.0, **kwargs)
    try:
        policy.load_state_dict(state)
    except RuntimeError as exc:  # "Error(s) in loading state_dict ...:", then one line each
        lines = [line.strip() for line in str(exc).strip().splitlines()]
        first = lines[1] if len(lines) > 1 else lines[0]
        raise CheckpointError(f"the policy weights do not fit policy.json and the observation "
                              f"env.json builds ({first})") from None  # fmt: skip
    policy.set_training_mode(False)
    return policy


def torch_logits(policy: Any, obs: Any) -> np.ndarray:
    """The raw action logits of an SB3 ActorCriticPolicy (before the softmax) of a flat batch
    or, for a MultiInputPolicy, a dict of batches."""
    import torch

    with torch.no_grad():
        tensors = policy.obs_to_tensor(obs)[0] if isinstance(obs, dict) else torch.as_tensor(obs)
        features = policy.extract_features(tensors, policy.pi_features_extractor)
        return policy.action_net(policy.mlp_extractor.forward_actor(features)).numpy()  # type: ignore[no-any-return]


def _numpy_multi(folder: Path, spec: Dict[str, Any], backend: str) -> bool:
    """Whether a dict-form policy runs in numpy: FlatGridExtractor has a numpy twin
    (numpy_policy.FlatGridPolicy); the entity encoder needs torch."""
    numpy_backend = _backend(backend) == "numpy"
    if numpy_backend and spec["extractor"] != "FlatGridExtractor":
        raise CheckpointError(f"{folder}: a {spec['extractor']} policy needs torch")
    cnn = (spec.get("extractor_kwargs") or {}).get("cnn", "small")
    if numpy_backend and cnn != "small":  # the numpy twin has the small stack only
        raise CheckpointError(f"{folder}: a FlatGridExtractor with the {cnn!r} CNN needs torch")
    return numpy_backend


def _backend(requested: str) -> str:
    if requested not in ("auto", "torch", "numpy"):
        raise UsageError(f"backend must be auto, torch or numpy, not {requested!r}")
    if requested != "auto":
        return requested
    return "torch" if _installed("torch") and _installed("stable_baselines3") else "numpy"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # blocked, or a half-imported module
        return False


class CheckpointPolicy:
    """A checkpoint's policy: called on a batch of observations, it returns their actions.
    ``flatten`` is the observation form it reads (``make_env``'s and ``EntityVectorEnv``'s
    flag), so evaluation builds the env the policy needs without asking the folder again."""

    def __init__(self, act: Callable[[Any], np.ndarray], flatten: bool) -> None:
        self._act, self.flatten = act, flatten

    def __call__(self, obs: Any) -> np.ndarray:
        return self._act(obs)

    def __repr__(self) -> str:
        return f"CheckpointPolicy(flatten={self.flatten})"


def _load_enn(
    folder: Path, checkpoint: Checkpoint, rng: Optional[np.random.Generator]
) -> CheckpointPolicy:
    """An enn-trainer checkpoint's RogueNet (it reads the padded dict form), greedy where
    ``rng`` is None."""
    from procgen_entities.agents.enn_policy import ENN_FOLDER, load_enn_policy

    # hyperstate keeps the state as msgpack and the config as ron (data); its legacy
    # snapshots hold pickles (loaded only under UNSAFE_DESERIALIZE_PICKLE): refused here.
    pickled = sorted(str(p.relative_to(folder)) for p in (folder / ENN_FOLDER).rglob("*")
                     if p.suffix in (".pickle", ".pkl", ".pth", ".pt"))  # fmt: skip
    if pickled:
        raise CheckpointError(f"{folder}: pickled files ({', '.join(pickled)}) are not loaded")
    probe = make_env(checkpoint.env, 1, 0, flatten=False)
    names = probe.metadata["feature_names"]
    probe.close()
    actor = checkpoint.trainer.get("actor", "global")
    act = load_enn_policy(folder, names, actor, deterministic=rng is None, rng=rng)
    return CheckpointPolicy(act, flatten=False)


def _check_fits(folder: Path, spec: Dict[str, Any], space: Any, normalizer: Any) -> None:
    """CheckpointError where the observation env.json builds (``space``) is not the one the
    weights and statistics were trained on (another max_entities, tilemap or feature list
    changes its size): one line here, not a shape error in the first step."""
    why = "env.json's max_entities, tilemap or features differ from the training's"
    shapes = {k: s.shape for k, s in getattr(space, "spaces", {}).items()}
    for key, mean in getattr(normalizer, "means", {}).items():
        if shapes.get(key) != mean.shape or normalizer.variances[key].shape != mean.shape:
            raise CheckpointError(f"{folder / DICT_NORMALIZER_FILE}: the statistics of {key!r} "
                                  f"have shape {mean.shape}, env.json's observation "
                                  f"{shapes.get(key)} ({why})")  # fmt: skip
    if shapes:  # the dict form: its weights are checked against the space as they load
        return
    size = int(space.shape[0])
    if int(spec["observation_size"]) != size:
        raise CheckpointError(f"{folder}: env.json builds observations of {size} values, "
                              f"policy.json's observation_size is {spec['observation_size']} "
                              f"({why})")  # fmt: skip
    if isinstance(normalizer, Normalizer) and normalizer.norm_obs:
        if normalizer.obs_mean.shape != (size,):
            raise CheckpointError(f"{folder / NORMALIZER_FILE}: statistics of "
                                  f"{normalizer.obs_mean.size} values for observations of "
                                  f"{size}")  # fmt: skip


def _numpy_policy(
    folder: Path, spec: Dict[str, Any], space: Any, normalize: Any, rng: Any, values: int
) -> CheckpointPolicy:
    """An SB3 checkpoint's numpy twin (``space``: the dict form's space, None for the flat MLP,
    whose sizes _check_fits compared; ``values``: what policy.json declares), tried once on a
    zero observation of the dict form so that weights that do not fit it are refused here."""
    state = _numpy_state(folder, values)
    try:
        mlp: Any = (
            FlatGridPolicy(spec, state, list(space.spaces)) if space else MlpPolicy(spec, state)
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise CheckpointError(f"{folder}: {exc}") from None
    if space is not None:
        zeros = {k: np.zeros((1, *s.shape), s.dtype) for k, s in space.spaces.items()}
        try:
            mlp.logits(zeros)
        except ValueError as exc:
            raise CheckpointError(f"{folder}: the weights do not fit the observation env.json "
                                  f"builds ({exc})") from None  # fmt: skip
    return CheckpointPolicy(lambda obs: mlp.act(normalize(obs), rng), flatten=space is None)


def load_policy(
    folder: Path, *, deterministic: bool = True, backend: str = "auto", seed: Optional[int] = None
) -> CheckpointPolicy:
    """The checkpoint's policy as a function of a batch of observations: flat ones (normalised
    with the checkpoint's statistics when it was trained so) for an SB3 MLP, padded dicts for
    enn-trainer and the SB3 dict-form policies (``wants_dict_observation``; the returned
    policy's ``flatten`` says which).

    ``backend`` (SB3 checkpoints): "torch" (SB3's own policy), "numpy" (agents/numpy_policy.py,
    no torch needed) or "auto" (torch when torch and SB3 are installed). ``seed``: the sampling
    generator (``deterministic=False``; both SB3 backends and the RogueNet draw from it through
    ``choose_actions``, so the same seed gives the same actions up to float rounding)."""
    folder = Path(folder)
    checkpoint = Checkpoint.load(folder)
    from procgen_entities.agents.enn_policy import ENN_FOLDER

    rng = None if deterministic else np.random.default_rng(seed)
    if (folder / ENN_FOLDER).is_dir():
        return _load_enn(folder, checkpoint, rng)
    spec = read_spec(folder)
    normalize: Callable[[np.ndarray], np.ndarray] = lambda obs: obs  # noqa: E731
    if checkpoint.normalize:
        normalize = load_normalizer(folder)
    multi = spec["format"] == MULTI_SPEC_FORMAT
    flat = not _sb3_reads_dicts(checkpoint)  # env.json is read once, above
    if flat == multi:  # env.json and policy.json disagree on the form: say so, not a shape error
        raise CheckpointError(f"{folder}: policy.json is {spec['format']}, but env.json's policy "
                              f"reads the {'flat' if flat else 'dict'} observation")  # fmt: skip
    numpy_backend = (
        _backend(backend) == "numpy" if not multi else _numpy_multi(folder, spec, backend)
    )
    probe = make_env(checkpoint.env, 1, 0, flatten=flat)  # the observation env.json builds
    observation = probe.single_observation_space
    probe.close()
    _check_fits(folder, spec, observation, normalize if checkpoint.normalize else None)
    values = declared_values(folder, spec, observation)  # bounded before anything is built
    # the dict form's key order is the space's (the extractors flatten in it)
    space = observation if multi else None
    if numpy_backend:
        return _numpy_policy(folder, spec, space, normalize, rng, values)
    try:
        model = build_sb3_policy(spec, _torch_state(folder, values), space)
    except CheckpointError as exc:  # said with the folder's name
        message = str(exc)
        where = "" if str(folder) in message else f"{folder}: "
        raise CheckpointError(f"{where}{message}") from None

    def policy(obs: np.ndarray) -> np.ndarray:
        if rng is None:
            return model.predict(normalize(obs), deterministic=True)[0]  # type: ignore[no-any-return]
        # drawn from ``seed`` as the numpy backend draws, not from torch's global generator:
        # a sampled evaluation repeats on its seed, whatever ran before it in the process
        return choose_actions(torch_logits(model, normalize(obs)), rng)

    return CheckpointPolicy(policy, flatten=flat)


# ---- converting the old pickled format ----


def _load_pickled(folder: Path) -> tuple:
    """(policy, VecNormalize stats or None, optimizer state or None) of an old folder. Runs
    pickle: only for folders the user trusts."""
    import pickle

    optimizer = None
    if (folder / "model.zip").exists():
        from stable_baselines3 import PPO

        model = PPO.load(folder / "model.zip", device="cpu")
        policy, optimizer = model.policy, model.policy.optimizer.state_dict()
    if (folder / "policy.pth").exists():
        from stable_baselines3.common.policies import ActorCriticPolicy

        policy = ActorCriticPolicy.load(str(folder / "policy.pth"), device="cpu")
        if optimizer is not None:
            policy.optimizer.load_state_dict(optimizer)
    stats = None
    if (folder / "vecnormalize.pkl").exists():
        with (folder / "vecnormalize.pkl").open("rb") as f:
            stats = pickle.load(f)
    return policy, stats, optimizer


def convert(folder: Path, *, remove_pickles: bool = False) -> List[str]:
    """Convert an old checkpoint folder (pickles) to the data format, check the result gives the
    same logits and normalised observations, and return the files written. Unpickles the
    folder's files: call it only on folders whose source you trust."""
    from procgen_entities.agents.enn_policy import ENN_FOLDER

    folder = Path(folder)
    checkpoint = Checkpoint.load(folder)
    if (folder / ENN_FOLDER).is_dir():
        raise CheckpointError(f"{folder} is an enn-trainer checkpoint (not converted)")
    if not any((folder / name).exists() for name in PICKLED_FILES[1:]):
        raise CheckpointError(f"{folder} has no policy.pth or model.zip to convert")
    policy, stats, optimizer = _load_pickled(folder)
    # an SB3 policy over the dict form (the grid, the entity encoder) keeps per-key statistics
    dict_form = wants_dict_observation(folder)
    normalizer = None
    if checkpoint.normalize:
        if stats is None:
            raise CheckpointError(f"{folder}: env.json says normalised, but no vecnormalize.pkl")
        normalizer = (DictNormalizer if dict_form else Normalizer).from_vec_normalize(stats)
    save_sb3(folder, policy, normalizer, optimizer=optimizer is not None)
    # the observation statistics are compared only where the checkpoint normalises with them
    checked = stats if normalizer is not None else None
    (_check_dict_conversion if dict_form else _check_conversion)(folder, policy, checked)
    if remove_pickles:
        for name in PICKLED_FILES:
            (folder / name).unlink(missing_ok=True)
    written = [POLICY_SPEC, POLICY_TORCH, POLICY_NUMPY]
    written += [DICT_NORMALIZER_FILE if dict_form else NORMALIZER_FILE] * (normalizer is not None)
    written += [OPTIMIZER] * (optimizer is not None)
    return written


def _check_conversion(folder: Path, policy: Any, stats: Any) -> None:
    """The converted files against the pickled objects on observations around the statistics."""
    spec = read_spec(folder)
    rng = np.random.default_rng(0)
    size = spec["observation_size"]
    obs = rng.normal(size=(512, size)).astype(np.float32)
    if stats is not None:
        mean, std = stats.obs_rms.mean, np.sqrt(stats.obs_rms.var)
        obs = (mean + 3 * std * obs).astype(np.float32)
        mine = load_normalizer(folder)(obs)
        if not np.array_equal(mine, stats.normalize_obs(obs)):
            raise CheckpointError(f"{folder}: the converted normaliser differs from the pickle")
        obs = mine
    reference = torch_logits(policy, obs)
    rebuilt = torch_logits(build_sb3_policy(spec, _torch_state(folder)), obs)
    numpy_logits = MlpPolicy(spec, _numpy_state(folder)).logits(obs)
    _same_logits(folder, reference, rebuilt, exact=True)
    _same_logits(folder, reference, numpy_logits, exact=False)


def _same_logits(folder: Path, reference: np.ndarray, converted: np.ndarray, exact: bool) -> None:
    """torch against torch (the same weights, the same kernels) must match bit for bit; the numpy
    twin only up to float32 rounding relative to the logit's size, since its BLAS sums a layer's
    products in another order (1.0e-5 apart on logits of 16, the committed coinrun-15m here)."""
    if exact:
        same = np.array_equal(converted, reference)
    else:
        same = np.allclose(converted, reference, rtol=1e-4, atol=1e-5)
    if not same:
        worst = float(np.max(np.abs(converted - reference)))
        raise CheckpointError(
            f"{folder}: the converted policy's logits differ from the pickle's"
            f" (by up to {worst:.3g})"
        )


def _check_dict_conversion(folder: Path, policy: Any, stats: Any) -> None:
    """The dict form's converted files against the pickled objects, on observations drawn from
    the policy's own observation space (slots, masks and the class image alike)."""
    space = policy.observation_space
    space.seed(0)
    draws = [space.sample() for _ in range(256)]
    obs = {key: np.stack([d[key] for d in draws]) for key in space.spaces}
    if stats is not None:
        mine = load_normalizer(folder)(obs)
        theirs = stats.normalize_obs(obs)
        if any(not np.array_equal(mine[k], np.asarray(theirs[k], mine[k].dtype)) for k in obs):
            raise CheckpointError(f"{folder}: the converted normaliser differs from the pickle")
        obs = mine
    rebuilt = build_sb3_policy(read_spec(folder), _torch_state(folder), space)
    _same_logits(folder, torch_logits(policy, obs), torch_logits(rebuilt, obs), exact=True)
