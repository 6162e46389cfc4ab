"""An entity-native torch encoder for EntityVectorEnv's dict observation (needs torch).

``EntityEncoder`` reads the padded form (``<Type>`` [B, cap, F], ``<Type>_mask`` [B, cap],
``global`` [B, G] and, with ``grid=True``, ``grid`` [B, S, S]) and returns one feature vector per
observation:

- every slot of a type is embedded by that type's linear layer plus a learned type vector;
  and a small MLP shared by all slots; the globals become one more token, always present;
- optional transformer layers let the slots attend to each other (``n_layers``; off by
  default: on a 2-core CPU two layers cost ~10x the training time of the whole MLP recipe);
- learned queries, shifted by the globals' token, attend over all tokens with the masks
  honoured (a masked slot is zeroed before its embedding and never attended to, so its
  contents cannot change the output);
- the output is the globals' token, the pooled queries and, with a grid, a small CNN's reading
  of the class image (one-hot by class).

No positional encoding: the output does not depend on the order of a type's slots. Inputs go
through ``symlog`` (sign(x) log(1 + |x|)) instead of a running normaliser, so a checkpoint needs
no statistics besides its weights. ``sb3.EntityExtractor`` wraps it for Stable-Baselines3's
``MultiInputPolicy``.
"""

from __future__ import annotations

from typing import List, Mapping, Optional, Tuple

import torch
from torch import nn

from procgen_entities.errors import UsageError
from procgen_entities.gymnasium.observation import GLOBAL_KEY, GRID_KEY
from procgen_entities.gymnasium.sizes import GRID_CNNS, encoder_inputs

__all__ = [
    "GRID_CNNS", "EntityEncoder", "FlatGridEncoder", "GridEncoder", "encoder_inputs", "symlog",
]  # fmt: skip


def symlog(x: torch.Tensor) -> torch.Tensor:
    return torch.sign(x) * torch.log1p(torch.abs(x))


class GridEncoder(nn.Module):
    """Class image uint8 [B, S, S] (class + 1, 0 empty) -> [B, out]: one-hot, 3x3 convolutions
    with ReLU (``GRID_CNNS[cnn]``), a linear layer with ReLU. Small by default: it runs on a
    CPU next to the envs. ``out`` None: the stack's own head width."""

    def __init__(
        self, n_values: int, size: int, out: Optional[int] = 64, cnn: str = "small"
    ) -> None:
        super().__init__()
        if cnn not in GRID_CNNS:
            raise UsageError(f"cnn must be one of {sorted(GRID_CNNS)}, got {cnn!r}")
        self.n_values = n_values
        stack, head = GRID_CNNS[cnn]
        layers: List[nn.Module] = []
        before = n_values
        for width, stride in stack:
            layers += [nn.Conv2d(before, width, 3, stride=stride, padding=1), nn.ReLU()]
            before = width
        self.conv = nn.Sequential(*layers, nn.Flatten())
        with torch.no_grad():
            flat = self.conv(torch.zeros(1, n_values, size, size)).shape[1]
        out = head if out is None else out
        self.head = nn.Sequential(nn.Linear(flat, out), nn.ReLU())
        self.out_dim = out

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        ids = image.long().clamp(0, self.n_values - 1)
        onehot = nn.functional.one_hot(ids, self.n_values).permute(0, 3, 1, 2).float()
        return self.head(self.conv(onehot))  # type: ignore[no-any-return]


class EntityEncoder(nn.Module):
    """Attention over masked entity slots, pooled with the globals (see the module docstring).

    ``types``: entity type -> (cap, features) in observation order; ``n_globals``: G;
    ``grid``: (number of values = classes + 1, S) for a class image, or None. ``n_layers``
    self-attention layers between the slots (0: none, the cheap default on a CPU), then
    ``n_queries`` learned queries, each shifted by the globals' token, attend over every slot
    (pooling by attention)."""

    def __init__(
        self,
        types: Mapping[str, Tuple[int, int]],
        n_globals: int,
        *,
        d_model: int = 64,
        n_heads: int = 4,
        n_layers: int = 0,
        n_queries: int = 4,
        grid: Optional[Tuple[int, int]] = None,
        grid_dim: int = 64,
    ) -> None:
        super().__init__()
        if not types:
            raise UsageError("EntityEncoder needs at least one entity type")
        self.types = dict(types)
        self.embed = nn.ModuleDict({name: nn.Linear(f, d_model) for name, (_, f) in types.items()})
        self.type_vectors = nn.ParameterDict(
            {name: nn.Parameter(torch.randn(d_model) * 0.02) for name in types}
        )
        self.slot_mlp = nn.Sequential(nn.ReLU(), nn.Linear(d_model, d_model), nn.ReLU())
        self.embed_global = nn.Sequential(nn.Linear(max(n_globals, 1), d_model), nn.ReLU())
        self.n_globals = n_globals
        self.layers: Optional[nn.TransformerEncoder] = None
        if n_layers:
            layer = nn.TransformerEncoderLayer(
                d_model, n_heads, dim_feedforward=2 * d_model, dropout=0.0, batch_first=True,
                norm_first=True,
            )  # fmt: skip
            self.layers = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.queries = nn.Parameter(torch.randn(n_queries, d_model) * 0.1)
        self.pool = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.grid = GridEncoder(grid[0], grid[1], grid_dim) if grid is not None else None
        self.out_dim = (1 + n_queries) * d_model + (grid_dim if grid is not None else 0)

    def forward(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        glob = obs[GLOBAL_KEY]
        batch = glob.shape[0]
        if self.n_globals == 0:
            glob = torch.zeros(batch, 1, device=glob.device)
        g = self.embed_global(symlog(glob))
        tokens, masks = [g.unsqueeze(1)], [torch.ones(batch, 1, dtype=torch.bool, device=g.device)]
        zero = torch.zeros((), device=g.device)
        for name in self.types:
            mask = obs[f"{name}_mask"] > 0.5
            # where(), not a product: a masked slot holding inf or NaN must not leak through
            values = torch.where(mask.unsqueeze(-1), obs[name], zero)
            tokens.append(self.embed[name](symlog(values)) + self.type_vectors[name])
            masks.append(mask)
        valid = torch.cat(masks, dim=1)
        x = torch.cat([tokens[0], self.slot_mlp(torch.cat(tokens[1:], dim=1))], dim=1)
        if self.layers is not None:
            x = self.layers(x, src_key_padding_mask=~valid)
        # The globals' token is always a valid key, so no query ever sees only masked slots.
        queries = self.queries.unsqueeze(0) + g.unsqueeze(1)
        pooled, _ = self.pool(queries, x, x, key_padding_mask=~valid, need_weights=False)
        parts = [g, pooled.reshape(batch, -1)]
        if self.grid is not None:
            parts.append(self.grid(obs[GRID_KEY]))
        return torch.cat(parts, dim=1)


class FlatGridEncoder(nn.Module):
    """The flat MLP recipe's input plus a CNN over the class image: every type's slot values
    and mask and the globals, flattened in observation order (the observation normaliser's
    output: no symlog), next to ``GridEncoder``'s features. The cheap way to give an MLP the
    terrain's geometry."""

    def __init__(
        self,
        types: Mapping[str, Tuple[int, int]],
        n_globals: int,
        grid: Tuple[int, int],
        *,
        grid_dim: Optional[int] = None,
        cnn: str = "small",
    ) -> None:
        super().__init__()
        self.types = dict(types)
        # grid_dim None: the stack's head width (64 for "small", as the committed checkpoints)
        self.grid = GridEncoder(grid[0], grid[1], grid_dim, cnn=cnn)
        self.out_dim = sum(c * (f + 1) for c, f in types.values()) + n_globals + self.grid.out_dim

    def input_keys(self) -> List[str]:
        """The keys the MLP's input is made of, in order: each type's slots and mask, then the
        globals (the lean learner packs them in this order once per step)."""
        return [k for name in self.types for k in (name, f"{name}_mask")] + [GLOBAL_KEY]

    def forward(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        parts = [obs[key].flatten(1).float() for key in self.input_keys()]
        parts.append(self.grid(obs[GRID_KEY]))
        return torch.cat(parts, dim=1)
