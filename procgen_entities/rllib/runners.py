"""Where the EnvRunners are and what they host, asked of the runners themselves."""

from __future__ import annotations

import os
import socket
from typing import Any, Dict, List

__all__ = ["describe_runner", "describe_runners"]


def describe_runner(env_runner: Any) -> Dict[str, Any]:
    """One EnvRunner's view of itself (runs in the runner's process): its index, Ray node id,
    host, pid, the class of the env it hosts (RLlib's wrappers unwrapped), its env count, pool
    threads and autoreset mode, torch's thread count, and the sequence number of the weights
    it last received from the learner."""
    import ray
    import torch

    env = env_runner.env.unwrapped
    stepper = getattr(env, "stepper", None)
    return {
        "index": env_runner.worker_index,
        "node": ray.get_runtime_context().get_node_id(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "env_class": f"{type(env).__module__}.{type(env).__qualname__}",
        "num_envs": int(env.num_envs),
        "env_threads": getattr(stepper, "num_threads", None),
        "autoreset_mode": str(getattr(env.metadata.get("autoreset_mode"), "name", None)),
        "torch_threads": torch.get_num_threads(),
        "weights_seq_no": int(getattr(env_runner, "_weights_seq_no", -1)),
    }


def describe_runners(algo: Any) -> List[Dict[str, Any]]:
    """``describe_runner`` of every healthy remote EnvRunner of ``algo``, by index."""
    found = algo.env_runner_group.foreach_env_runner(describe_runner, local_env_runner=False)
    return sorted(found, key=lambda d: d["index"])
