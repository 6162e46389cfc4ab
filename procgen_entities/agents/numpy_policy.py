"""Inference for the SB3 MLP checkpoints without torch: the observation normaliser and the actor
MLP as numpy, from the checkpoint's data files (``normalizer.npz``, ``policy.json``,
``policy.npz``; agents/checkpoint.py writes them).

It computes what SB3 computes: ``VecNormalize.normalize_obs`` (in float64, then float32), the
actor's Linear/activation layers and ``action_net`` (from the float32 weights and inputs, in
float64, so the result is torch's up to torch's own float32 rounding: 4e-6 on logits of ~12),
then the argmax of the logits (SB3's greedy action) or a sample of their softmax
(tests/test_checkpoint.py checks 1e-5 and identical greedy actions on real episodes).
"""

from __future__ import annotations

import math
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np
import numpy.typing as npt

from procgen_entities.errors import UsageError
from procgen_entities.files import open_regular

__all__ = [
    "ACTIVATIONS",
    "DICT_NORMALIZER_FILE",
    "DictNormalizer",
    "FlatGridPolicy",
    "MAX_ARRAYS",
    "MAX_VALUES",
    "MlpPolicy",
    "NORMALIZER_FILE",
    "Normalizer",
    "choose_actions",
    "read_npz",
]

NORMALIZER_FILE = "normalizer.npz"

#: The activations an SB3 MLP checkpoint may name (policy.json's "activation").
ACTIVATIONS: Dict[str, Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]] = {
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0.0),
}

#: normalizer.npz's arrays: SB3 VecNormalize's running statistics and settings.
NORMALIZER_KEYS = (
    "obs_mean", "obs_var", "obs_count", "ret_mean", "ret_var", "ret_count",
    "clip_obs", "clip_reward", "epsilon", "gamma", "norm_obs", "norm_reward",
)  # fmt: skip


#: The most values ``read_npz`` reads from one file (2**24: 64 MiB of float32), and the most
#: arrays: a checkpoint is data, and a few MB of compressed zeros would otherwise decompress to
#: gigabytes. agents/checkpoint.py holds a policy's weights to what its policy.json declares.
MAX_VALUES = 2**24
MAX_ARRAYS = 4096
#: The most bytes of one .npy header (numpy's own limit, 10,000, and the magic before it).
_MAX_HEADER = 2**14


def _npz_values(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> int:
    """The values of one ``.npz`` member, from its .npy header (decompressing only that): numbers
    or booleans of at most 8 bytes, whose shape accounts for the member's uncompressed size (the
    zip header's file_size) exactly."""
    name = info.filename
    with archive.open(info) as member:
        try:
            version = np.lib.format.read_magic(member)
            if version not in ((1, 0), (2, 0)):
                raise ValueError(f"unsupported .npy version {version}")
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else (
                np.lib.format.read_array_header_2_0)  # fmt: skip
            shape, _, dtype = read(member)
        except ValueError as exc:
            raise ValueError(f"{path}: member {name!r} is not a .npy array ({exc})") from None
        header = member.tell()
    if dtype.kind not in "biuf" or dtype.itemsize > 8:
        raise ValueError(f"{path}: member {name!r} holds {dtype}, not numbers")
    values = math.prod(int(n) for n in shape)
    if header + values * dtype.itemsize != info.file_size:
        raise ValueError(f"{path}: member {name!r} declares shape {tuple(shape)} of {dtype} "
                         f"but holds {info.file_size - header} bytes")  # fmt: skip
    return values


def _check_npz(path: Path, file: BinaryIO, max_values: int) -> None:
    """ValueError naming ``path`` unless every member is a .npy array of numbers and they hold
    at most ``max_values`` values in all: the zip headers' sizes and the .npy headers' shapes,
    read before any array is decompressed."""
    with zipfile.ZipFile(file) as archive:
        infos = archive.infolist()
        if len(infos) > MAX_ARRAYS:
            raise ValueError(f"{path} holds {len(infos)} arrays (at most {MAX_ARRAYS})")
        total = 0
        for info in infos:
            if info.file_size > _MAX_HEADER + 8 * (max_values - total):
                raise ValueError(f"{path}: member {info.filename!r} decompresses to "
                                 f"{info.file_size:,} bytes, more than the {max_values:,} "
                                 "values the file may hold")  # fmt: skip
            total += _npz_values(path, archive, info)
            if total > max_values:
                raise ValueError(f"{path} holds more than the {max_values:,} values it may "
                                 f"({total:,} up to member {info.filename!r})")  # fmt: skip


def read_npz(
    path: Path, required: Tuple[str, ...] = (), max_values: int = MAX_VALUES
) -> Dict[str, np.ndarray]:
    """Every array of an ``.npz`` file (a regular file), read without pickle: numbers only, at
    most ``max_values`` values in all, the members' sizes checked before they are decompressed;
    a ValueError names the file if it is unreadable, too big or lacks one of ``required``."""
    try:
        with open_regular(path) as file:  # a FIFO would block open() forever
            _check_npz(path, file, max_values)
            file.seek(0)
            with np.load(file, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        message = str(exc)
        if message.startswith(str(path)):
            raise ValueError(message) from None
        raise ValueError(f"{path} is not a readable .npz file ({exc})") from None
    missing = [k for k in required if k not in arrays]
    if missing:
        raise ValueError(f"{path} lacks {', '.join(missing)}")
    return arrays


@dataclass
class Normalizer:
    """SB3 VecNormalize's observation statistics (what inference uses) and reward statistics
    (what resuming a run needs), as plain arrays."""

    obs_mean: np.ndarray
    obs_var: np.ndarray
    obs_count: float
    ret_mean: float = 0.0
    ret_var: float = 1.0
    ret_count: float = 1e-4
    clip_obs: float = 10.0
    clip_reward: float = 10.0
    epsilon: float = 1e-8
    gamma: float = 0.99
    norm_obs: bool = True
    norm_reward: bool = True

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """VecNormalize.normalize_obs: float64 arithmetic, then float32."""
        if not self.norm_obs:
            return obs
        scaled = (obs - self.obs_mean) / np.sqrt(self.obs_var + self.epsilon)
        return np.clip(scaled, -self.clip_obs, self.clip_obs).astype(np.float32)

    def arrays(self) -> Dict[str, np.ndarray]:
        return {k: np.asarray(getattr(self, k)) for k in NORMALIZER_KEYS}

    def save(self, path: Path) -> None:
        np.savez(path, **self.arrays())

    @classmethod
    def load(cls, path: Path) -> "Normalizer":
        a = read_npz(path, NORMALIZER_KEYS)
        mean, var = a["obs_mean"].astype(np.float64), a["obs_var"].astype(np.float64)
        if mean.ndim != 1 or mean.shape != var.shape:
            raise ValueError(f"{path}: obs_mean and obs_var must be vectors of one size")
        scalars = {k: float(a[k]) for k in NORMALIZER_KEYS[2:10] if k != "obs_count"}
        return cls(obs_mean=mean, obs_var=var, obs_count=float(a["obs_count"]), **scalars,
                   norm_obs=bool(a["norm_obs"]), norm_reward=bool(a["norm_reward"]))  # fmt: skip

    @classmethod
    def from_vec_normalize(cls, vn: Any) -> "Normalizer":
        """The statistics of an SB3 VecNormalize (flat observations only)."""
        if isinstance(vn.obs_rms, dict):
            raise UsageError("a VecNormalize of dict observations (the checkpoints are flat)")
        return cls(
            obs_mean=np.asarray(vn.obs_rms.mean, np.float64),
            obs_var=np.asarray(vn.obs_rms.var, np.float64),
            obs_count=float(vn.obs_rms.count), ret_mean=float(vn.ret_rms.mean),
            ret_var=float(vn.ret_rms.var), ret_count=float(vn.ret_rms.count),
            clip_obs=float(vn.clip_obs), clip_reward=float(vn.clip_reward),
            epsilon=float(vn.epsilon), gamma=float(vn.gamma), norm_obs=bool(vn.norm_obs),
            norm_reward=bool(vn.norm_reward),
        )  # fmt: skip

    def apply_to(self, vn: Any) -> None:
        """Set an SB3 VecNormalize's statistics to these (resuming a run)."""
        vn.obs_rms.mean, vn.obs_rms.var = self.obs_mean.copy(), self.obs_var.copy()
        vn.obs_rms.count = self.obs_count
        vn.ret_rms.mean, vn.ret_rms.var = np.float64(self.ret_mean), np.float64(self.ret_var)
        vn.ret_rms.count = self.ret_count


def _pi_layers(arch: Any) -> List[int]:
    return list(arch.get("pi", [])) if isinstance(arch, Mapping) else list(arch)


class MlpPolicy:
    """The actor of an SB3 ActorCriticPolicy with an MLP extractor (policy.json + policy.npz)."""

    def __init__(self, spec: Mapping[str, Any], weights: Mapping[str, np.ndarray]) -> None:
        activation = spec.get("activation")
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r} (one of {', '.join(ACTIVATIONS)})")
        self.activation = ACTIVATIONS[activation]
        self.layers: List[Tuple[np.ndarray, np.ndarray]] = []
        width = int(spec["observation_size"])
        hidden = len(_pi_layers(spec["net_arch"]))
        # SB3's policy_net is Sequential(Linear, activation, Linear, activation, ...).
        names = [f"mlp_extractor.policy_net.{2 * i}" for i in range(hidden)]
        for name in [*names, "action_net"]:
            w, b = weights.get(f"{name}.weight"), weights.get(f"{name}.bias")
            if (
                w is None
                or b is None
                or w.ndim != 2
                or w.shape[1] != width
                or b.shape != w.shape[:1]
            ):
                raise ValueError(f"policy weights: {name} is missing or does not fit the layers")
            self.layers.append((np.ascontiguousarray(w.T, np.float64), b.astype(np.float64)))
            width = w.shape[0]
        if width != int(spec["actions"]):
            raise ValueError(f"policy weights: {width} logits for {spec['actions']} actions")
        self.observation_size = int(spec["observation_size"])

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """[n, actions] float32 logits of [n, observation_size] (already normalised) inputs."""
        x = np.asarray(obs, dtype=np.float32)  # what the torch policy gets
        if x.ndim != 2 or x.shape[1] != self.observation_size:
            raise UsageError(f"expected observations [n, {self.observation_size}], got {x.shape}")
        h = x.astype(np.float64)
        for w, b in self.layers[:-1]:
            h = self.activation(h @ w + b)
        w, b = self.layers[-1]
        return (h @ w + b).astype(np.float32)  # type: ignore[no-any-return]

    def act(self, obs: np.ndarray, rng: Optional[np.random.Generator] = None) -> np.ndarray:
        """Greedy actions (``rng`` None), else sampled from the logits' softmax."""
        return choose_actions(self.logits(obs), rng)


def choose_actions(logits: np.ndarray, rng: Optional[np.random.Generator] = None) -> np.ndarray:
    """The argmax of each row of ``logits`` [n, actions] (``rng`` None), else one draw of its
    softmax by inverting the cumulative distribution with one ``rng.random()`` per row: both
    backends sample through it, so a seed gives the same draws whichever computed the logits."""
    if rng is None:
        return logits.argmax(axis=1)  # type: ignore[no-any-return]
    z = logits.astype(np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    cumulative = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    u = rng.random((len(z), 1))
    return np.minimum((cumulative < u).sum(axis=1), z.shape[1] - 1)


def _conv3x3_stride2(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """torch's Conv2d(kernel 3, stride 2, padding 1) of [n, c, h, w] with weights [o, c, 3, 3]."""
    n, c, h, wd = x.shape
    padded = np.zeros((n, c, h + 2, wd + 2), dtype=x.dtype)
    padded[:, :, 1:-1, 1:-1] = x
    oh, ow = (h - 1) // 2 + 1, (wd - 1) // 2 + 1
    out = np.empty((n, w.shape[0], oh, ow), dtype=x.dtype)
    for i in range(oh):
        for j in range(ow):
            patch = padded[:, :, 2 * i : 2 * i + 3, 2 * j : 2 * j + 3].reshape(n, -1)
            out[:, :, i, j] = patch @ w.reshape(w.shape[0], -1).T
    return out + b[None, :, None, None]  # type: ignore[no-any-return]


class FlatGridPolicy:
    """The actor of an SB3 ``MultiInputPolicy`` with ``FlatGridExtractor``
    (gymnasium/policy.py ``FlatGridEncoder``): per entity type its slot values then its mask,
    flattened in the observation space's key order, the globals, then the grid's features (the
    one-hot class image, two 3x3 stride-2 convolutions with ReLU, flatten, a linear layer with
    ReLU), into the actor MLP. ``keys``: the env's single observation space keys, in order."""

    PREFIX = "features_extractor.net.grid."

    def __init__(
        self, spec: Mapping[str, Any], weights: Mapping[str, np.ndarray], keys: List[str]
    ) -> None:
        from procgen_entities.gymnasium.observation import GLOBAL_KEY, GRID_KEY

        self.global_key, self.grid_key = GLOBAL_KEY, GRID_KEY
        self.types = [
            k for k in keys if k not in (GLOBAL_KEY, GRID_KEY) and not k.endswith("_mask")
        ]
        self.grid = [self._layer(weights, f"{self.PREFIX}{name}") for name in
                     ("conv.0", "conv.2", "head.0")]  # fmt: skip
        self.n_values = int(self.grid[0][0].shape[1])
        first = weights.get("mlp_extractor.policy_net.0.weight")
        if first is None or first.ndim != 2:
            raise ValueError("policy weights: mlp_extractor.policy_net.0 is missing")
        self.mlp = MlpPolicy({**spec, "observation_size": int(first.shape[1])}, weights)

    @staticmethod
    def _layer(weights: Mapping[str, np.ndarray], name: str) -> Tuple[np.ndarray, np.ndarray]:
        w, b = weights.get(f"{name}.weight"), weights.get(f"{name}.bias")
        if w is None or b is None or b.shape != w.shape[:1]:
            raise ValueError(f"policy weights: {name} is missing or does not fit the layers")
        return w.astype(np.float64), b.astype(np.float64)

    def features(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """[n, features] float32: FlatGridEncoder's output (inputs already normalised)."""
        parts = []
        for name in self.types:
            values = np.asarray(obs[name], np.float32)
            parts += [values.reshape(len(values), -1), np.asarray(obs[f"{name}_mask"], np.float32)]
        parts.append(np.asarray(obs[self.global_key], np.float32))
        ids = np.clip(np.asarray(obs[self.grid_key]).astype(np.int64), 0, self.n_values - 1)
        h = (np.arange(self.n_values)[None, :, None, None] == ids[:, None]).astype(np.float64)
        for w, b in self.grid[:2]:
            h = np.maximum(_conv3x3_stride2(h, w, b), 0.0)
        w, b = self.grid[2]
        h = np.maximum(h.reshape(len(h), -1) @ w.T + b, 0.0)
        parts.append(h.astype(np.float32))  # torch's float32 features
        return np.concatenate(parts, axis=1)

    def logits(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.mlp.logits(self.features(obs))

    def act(
        self, obs: Mapping[str, np.ndarray], rng: Optional[np.random.Generator] = None
    ) -> np.ndarray:
        return self.mlp.act(self.features(obs), rng)


#: normalizer.npz of a dict-observation policy (gymnasium/sb3.py's extractors).
DICT_NORMALIZER_FILE = "normalizer-dict.npz"


@dataclass
class DictNormalizer:
    """SB3 VecNormalize's statistics for dict observations: per normalised key its mean,
    variance and count (keys it does not normalise, such as masks and the class image, pass
    through); ``base`` holds the return statistics and the settings (its own observation
    arrays are empty); ``base.norm_obs=False`` keeps only the return statistics."""

    means: Dict[str, np.ndarray]
    variances: Dict[str, np.ndarray]
    counts: Dict[str, float]
    base: Normalizer

    def __getattr__(self, name: str) -> Any:  # gamma, clip_obs, norm_reward, ... of ``base``
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def __call__(self, obs: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        base = self.base
        if not base.norm_obs:
            return obs
        out = dict(obs)
        for key, mean in self.means.items():
            scaled = (obs[key] - mean) / np.sqrt(self.variances[key] + base.epsilon)
            out[key] = np.clip(scaled, -base.clip_obs, base.clip_obs).astype(np.float32)
        return out

    def save(self, path: Path) -> None:
        arrays = self.base.arrays()
        for key in self.means:
            arrays[f"mean:{key}"] = self.means[key]
            arrays[f"var:{key}"] = self.variances[key]
            arrays[f"count:{key}"] = np.asarray(self.counts[key])
        np.savez(path, **arrays)

    @classmethod
    def load(cls, path: Path) -> "DictNormalizer":
        base = Normalizer.load(path)
        a = read_npz(path)
        keys = [name[5:] for name in a if name.startswith("mean:")]
        missing = [k for k in keys if f"var:{k}" not in a or f"count:{k}" not in a]
        if missing:
            raise ValueError(f"{path}: no variance or count for {', '.join(missing)}")
        return cls(
            means={k: a[f"mean:{k}"].astype(np.float64) for k in keys},
            variances={k: a[f"var:{k}"].astype(np.float64) for k in keys},
            counts={k: float(a[f"count:{k}"]) for k in keys},
            base=base,
        )

    @classmethod
    def from_vec_normalize(cls, vn: Any) -> "DictNormalizer":
        rms = vn.obs_rms if (vn.norm_obs and isinstance(vn.obs_rms, dict)) else {}
        empty = np.zeros(0, dtype=np.float64)
        base = Normalizer(
            obs_mean=empty, obs_var=empty, obs_count=0.0, ret_mean=float(vn.ret_rms.mean),
            ret_var=float(vn.ret_rms.var), ret_count=float(vn.ret_rms.count),
            clip_obs=float(vn.clip_obs), clip_reward=float(vn.clip_reward),
            epsilon=float(vn.epsilon), gamma=float(vn.gamma), norm_obs=bool(vn.norm_obs),
            norm_reward=bool(vn.norm_reward),
        )  # fmt: skip
        return cls(
            means={k: np.asarray(r.mean, np.float64) for k, r in rms.items()},
            variances={k: np.asarray(r.var, np.float64) for k, r in rms.items()},
            counts={k: float(r.count) for k, r in rms.items()},
            base=base,
        )

    def apply_to(self, vn: Any) -> None:
        """Set an SB3 VecNormalize's statistics to these (resuming a run)."""
        for key, mean in self.means.items():
            rms = vn.obs_rms[key]
            rms.mean, rms.var, rms.count = mean.copy(), self.variances[key].copy(), self.counts[key]
        vn.ret_rms.mean = np.float64(self.base.ret_mean)
        vn.ret_rms.var = np.float64(self.base.ret_var)
        vn.ret_rms.count = self.base.ret_count
