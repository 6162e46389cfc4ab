"""What every EnvRunner does beyond RLlib's defaults: thread limits, env seeds, episode records.

These run inside the EnvRunner actors, wherever Ray placed them: RLlib pickles them by reference
(module-level functions, bound with functools.partial), so the runners import this module.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

__all__ = ["EPISODES_KEY", "RUNNER_SEED_STRIDE", "record_episode", "runner_seed", "set_up_runner"]

#: Metrics key of the per-episode records (an RLlib "item_series": every finished episode).
EPISODES_KEY = "procgen_entities_episodes"

#: Seeds of two EnvRunners are this far apart. An EntityVectorEnv seeded s derives its other
#: procgen groups' seeds from s, but a SyncVectorEnv seeds its envs s, s+1, ..., so runners seeded
#: 1 apart (RLlib's own scheme, config.seed + worker_index) would replay each other's levels.
RUNNER_SEED_STRIDE = 1 << 20


def runner_seed(seed: int, worker_index: int) -> int:
    """The level-sampling seed of EnvRunner ``worker_index`` in a run seeded ``seed``."""
    return int(seed) + RUNNER_SEED_STRIDE * int(worker_index)


def set_up_runner(
    *,
    env_runner: Any,
    env: Any,
    torch_threads: Optional[int] = 1,
    seed: Optional[int] = None,
    **kwargs: Any,
) -> None:
    """``on_environment_created``: torch to ``torch_threads`` threads (None: torch's default)
    and, with ``seed``, the env's procgen seeded per runner."""
    if torch_threads:
        import torch

        torch.set_num_threads(int(torch_threads))
    if seed is not None:
        # RLlib's own reset comes later with seed=None (config.seed stays unset); procgen then
        # restarts with the seeds set here.
        env.reset(seed=runner_seed(seed, getattr(env_runner, "worker_index", 0) or 0))


def record_episode(
    *,
    episode: Any,
    prev_episode_chunks: Optional[List[Any]] = None,
    env_runner: Any = None,
    metrics_logger: Any = None,
    env_index: int = 0,
    **kwargs: Any,
) -> None:
    """``on_episode_end``: one record per finished episode, logged under ``EPISODES_KEY``.

    ``return``/``length`` are what RLlib collected (its episode chunks' rewards and steps),
    ``env_return``/``env_length`` what the env counted itself (``info["episode_stats"]``), and
    ``level_complete`` the game's own flag on the terminal step.
    """
    if metrics_logger is None:
        return
    chunks = [*(prev_episode_chunks or []), episode]
    info: Dict[str, Any] = episode.get_infos(-1) or {}
    counted = info.get("episode_stats") or {}
    record = {
        "return": float(sum(c.get_return() for c in chunks)),
        "length": int(sum(len(c) for c in chunks)),
        "env_return": _number(counted.get("r")),
        "env_length": _number(counted.get("l")),
        "level_complete": _flag(info.get("prev_level_complete")),
        "truncated": bool(episode.is_truncated),
        "runner": int(getattr(env_runner, "worker_index", 0) or 0),
        "env_index": int(env_index),
    }
    metrics_logger.log_value(EPISODES_KEY, record, reduce="item_series")


def _number(value: Any) -> Optional[float]:
    return None if value is None else float(np.asarray(value).reshape(-1)[0])


def _flag(value: Any) -> Optional[bool]:
    return None if value is None else bool(np.asarray(value).reshape(-1)[0])
