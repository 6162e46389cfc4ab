"""RLlib on a real two-node Ray cluster on this machine, one native EntityVectorEnv per EnvRunner.

The fixture starts two Ray nodes as separate processes (``ray start --head --block`` and
``ray start --address ... --block``), each in its own session (process group), with its own
ports, two logical CPUs, a small object store, a per-test temp dir and auth token, and one unit
of the custom resource ``runner_slot``. Every EnvRunner asks for one ``runner_slot``, so two
runners can only run on two different nodes. Teardown kills those two process groups and every
process they started (never ``ray stop``, which would end every Ray process on the host), also
when a test fails.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List

import numpy as np
import pytest

pytestmark = [pytest.mark.ray, pytest.mark.live]

# Short episodes (it ends when the bot hits a wall) with positive and negative rewards.
GAME = "fruitbot"
SLOT = "runner_slot"
ENVS_PER_RUNNER = 8
ROLLOUT = 64


@dataclass
class Cluster:
    address: str
    node_ids: Dict[str, str]  # "head" / "worker" -> Ray node id
    temp_dir: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_node(name: str, extra: List[str], env: Dict[str, str], logs: Path) -> subprocess.Popen:
    ray_cli = str(Path(sys.executable).with_name("ray"))
    ports = {
        "--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
        "--dashboard-agent-grpc-port", "--runtime-env-agent-port", "--metrics-export-port",
    }  # fmt: skip
    cmd = [ray_cli, "start", "--block", "--num-cpus", "2", "--num-gpus", "0",
           "--object-store-memory", str(100 * 2**20), "--resources", json.dumps({SLOT: 1}),
           "--disable-usage-stats"]  # fmt: skip
    for flag in sorted(ports):
        cmd += [flag, str(_free_port())]
    with (logs / f"{name}.log").open("w") as log:  # the node keeps its own descriptor
        return subprocess.Popen(
            cmd + extra, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def _kill_tree(nodes: List[subprocess.Popen]) -> None:
    """SIGKILL each node's process group and every process it started (Ray puts some of its
    workers in groups of their own). A throwaway cluster needs no graceful shutdown."""
    import psutil

    procs: List[Any] = []
    for node in nodes:
        try:
            root = psutil.Process(node.pid)
            procs += [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
    for node in nodes:
        try:
            os.killpg(node.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    for node in nodes:
        node.wait(timeout=30)
    psutil.wait_procs(procs, timeout=10)


def _wait(what: str, ready: Any, nodes: List[subprocess.Popen], logs: Path, limit: float) -> None:
    deadline = time.monotonic() + limit
    while not ready():
        dead = [n for n in nodes if n.poll() is not None]
        if dead or time.monotonic() > deadline:
            tails = {p.name: p.read_text()[-2000:] for p in logs.glob("*.log")}
            pytest.fail(f"Ray cluster: {what} (exited: {[n.args[1:3] for n in dead]}) {tails}")
        time.sleep(0.2)


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    temp_dir = tmp_path_factory.mktemp("ray")
    token = temp_dir / "auth_token"
    token.write_text(secrets.token_hex(32))
    # Token authentication (Ray's default) with this cluster's own token, for the nodes and this
    # process (the driver); nothing read from or written to ~/.ray.
    ray_env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token),
               "RAY_USAGE_STATS_ENABLED": "0"}  # fmt: skip
    env = {**os.environ, **ray_env}
    port = _free_port()
    nodes: List[subprocess.Popen] = []
    with pytest.MonkeyPatch.context() as patch:
        for key, value in ray_env.items():
            patch.setenv(key, value)
        # Ray reads the token settings when it is first imported.
        assert "ray" not in sys.modules, "ray imported before the cluster fixture"
        import ray

        # Functions of this module that run in the EnvRunners travel by value (the runners
        # cannot import the tests).
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        try:
            nodes.append(_start_node("head", [
                "--head", "--port", str(port), "--temp-dir", str(temp_dir),
                "--include-dashboard", "false", "--ray-client-server-port", str(_free_port()),
            ], env, temp_dir))  # fmt: skip
            _wait("the head node's GCS", lambda: _accepts(port), nodes, temp_dir, 60)
            address = f"127.0.0.1:{port}"
            nodes.append(_start_node("worker", ["--address", address], env, temp_dir))
            ray.init(address=address, logging_level="WARNING", log_to_driver=False)

            def both_nodes() -> bool:
                return len([n for n in ray.nodes() if n["Alive"]]) == 2

            _wait("two alive nodes", both_nodes, nodes, temp_dir, 60)
            ids = {
                ("head" if "node:__internal_head__" in n["Resources"] else "worker"): n["NodeID"]
                for n in ray.nodes()
                if n["Alive"]
            }
            assert sorted(ids) == ["head", "worker"], ray.nodes()
            yield Cluster(address, ids, temp_dir)
        finally:
            try:
                if ray.is_initialized():
                    ray.shutdown()
            finally:
                _kill_tree(nodes)


def _config(**kwargs: Any) -> Any:
    from procgen_entities.rllib import build_config

    settings: Dict[str, Any] = dict(
        env_runners=2, envs_per_runner=ENVS_PER_RUNNER, rollout_length=ROLLOUT,
        minibatch_size=256, num_epochs=1, hiddens=(32,), seed=1,
        runner_resources={SLOT: 1}, env_config={"distribution_mode": "easy"},
    )  # fmt: skip
    settings.update(kwargs)
    return (
        build_config(GAME, **settings)
        .fault_tolerance(delay_between_env_runner_restarts_s=0.5)
        .reporting(metrics_num_episodes_for_smoothing=10_000)
    )


def _own_actor(runner: Any) -> Any:
    import ray

    return runner.worker_index, ray.get_runtime_context().current_actor


def _slots_in_use() -> float:
    """runner_slot units held (the cluster's resource view can lag a moment behind)."""
    import ray

    deadline = time.monotonic() + 10
    while True:
        held = ray.cluster_resources()[SLOT] - ray.available_resources().get(SLOT, 0.0)
        if held == 2 or time.monotonic() > deadline:
            return float(held)
        time.sleep(0.2)


def _runners(algo: Any) -> Dict[int, Dict[str, Any]]:
    from procgen_entities.rllib.runners import describe_runners

    return {d["index"]: d for d in describe_runners(algo)}


def _check_episodes(records: List[Dict[str, Any]]) -> None:
    """RLlib's episodes against the env's own count: what RLlib summed from its episode chunks
    (rewards it received, steps it recorded) must be what the env counted for that episode.
    NEXT_STEP got wrong (e.g. the reset step recorded as a step, a terminal step dropped, a
    reward attributed to the next episode) breaks the equality."""
    for r in records:
        assert r["env_return"] is not None and r["env_length"] is not None, r
        assert r["length"] == r["env_length"], r
        assert r["return"] == pytest.approx(r["env_return"], abs=1e-4), r
        assert r["length"] >= 1 and float(r["return"]).is_integer(), r  # fruitbot: whole rewards
        assert r["level_complete"] is not None, r


def test_two_runners_on_two_nodes_train_ppo(cluster: Cluster) -> None:
    from procgen_entities.gymnasium import EntityVectorEnv
    from procgen_entities.rllib.metrics import episodes_of, steps_sampled

    algo = _config().build_algo()
    try:
        runners = _runners(algo)
        assert sorted(runners) == [1, 2]
        # One runner per node: each holds the one runner_slot a node has (Ray might spread two
        # runners anyway; the slots are what guarantees it).
        assert {r["node"] for r in runners.values()} == set(cluster.node_ids.values()), runners
        assert _slots_in_use() == 2
        native = f"{EntityVectorEnv.__module__}.{EntityVectorEnv.__qualname__}"
        for r in runners.values():
            assert r["env_class"] == native, r
            assert r["num_envs"] == ENVS_PER_RUNNER
            assert r["env_threads"] == 1 and r["torch_threads"] == 1, r
            assert r["autoreset_mode"] == "NEXT_STEP", r
        records: List[Dict[str, Any]] = []
        for iteration in (1, 2):
            result = algo.train()
            assert result["training_iteration"] == iteration
            records += episodes_of(result)
        batch = 2 * ENVS_PER_RUNNER * ROLLOUT
        assert steps_sampled(result) >= 2 * batch
        assert result["fault_tolerance"]["num_healthy_workers"] == 2
        # Episodes finished on both runners (fruitbot's random-policy episodes last ~40 steps).
        assert {r["runner"] for r in records} == {1, 2}, records
        assert len(records) >= 8
        _check_episodes(records)
        assert result["learners"]["default_policy"]["num_module_steps_trained"] > 0
        # RLlib's own episode statistics agree with the records.
        stats = result["env_runners"]
        last = [r["return"] for r in episodes_of(result)]
        assert stats["num_episodes"] == len(last) and stats["num_episodes_lifetime"] == len(records)
        assert (min(last), max(last)) == (stats["episode_return_min"], stats["episode_return_max"])
    finally:
        algo.stop()


def test_a_killed_runner_is_restarted_and_the_run_goes_on(cluster: Cluster) -> None:
    import ray

    from procgen_entities.rllib.metrics import episodes_of, steps_sampled

    algo = _config().build_algo()
    try:
        algo.train()
        before = _runners(algo)
        victim = 2
        # A crash: the actor's process dies, Ray restarts the actor (RLlib gives its EnvRunners
        # max_restarts when restart_failed_env_runners is on) and RLlib restores its state.
        actors = dict(algo.env_runner_group.foreach_env_runner(_own_actor, local_env_runner=False))
        ray.kill(actors[victim], no_restart=False)
        records: List[Dict[str, Any]] = []
        steps, healthy, restarts = 0, [], 0
        deadline = time.monotonic() + 180  # a restart re-imports torch and RLlib: seconds
        while not (healthy[-1:] == [2] and restarts >= 1) and time.monotonic() < deadline:
            result = algo.train()  # must not raise: the run goes on with the healthy runner
            assert steps_sampled(result) > steps
            steps = steps_sampled(result)
            records += episodes_of(result)
            healthy.append(result["fault_tolerance"]["num_healthy_workers"])
            restarts = result["fault_tolerance"]["num_remote_worker_restarts"]
        assert healthy[-1] == 2 and restarts >= 1, f"not restored: {healthy}, {restarts} restarts"
        assert 1 in healthy  # it trained on while the runner was down
        print(f"healthy runners per iteration after the kill: {healthy}")
        after = _runners(algo)
        assert after[victim]["pid"] != before[victim]["pid"]  # a new process ...
        assert after[victim]["node"] == before[victim]["node"]  # ... where its slot is
        assert after[victim]["env_class"] == before[victim]["env_class"]
        assert after[1]["pid"] == before[1]["pid"]  # the other runner was never touched
        # The restored runner has the learner's latest weights and samples again.
        assert after[victim]["weights_seq_no"] == after[1]["weights_seq_no"] > 0, after
        result = algo.train()
        assert victim in {r["runner"] for r in episodes_of(result)}
        records += episodes_of(result)
        _check_episodes(records)
    finally:
        algo.stop()


def test_rllib_is_imported_only_on_demand() -> None:
    code = (
        "import sys, procgen_entities, procgen_entities.gymnasium;"
        "sys.exit(1 if any(m == 'ray' or m.startswith('ray.') for m in sys.modules) else 0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_episode_records_in_the_plot_format(tmp_path: Path) -> None:
    """MetricsWriter's file loads with the plot tool (no cluster needed)."""
    from procgen_entities.agents.metrics import load_run
    from procgen_entities.rllib.callbacks import EPISODES_KEY
    from procgen_entities.rllib.metrics import MetricsWriter

    writer = MetricsWriter(tmp_path / "metrics.jsonl", {"game": GAME, "r_min": 0, "r_max": 1})
    episodes = [{"return": float(r), "length": 10, "level_complete": r > 1, "runner": 1}
                for r in (1, -3, 2)]  # fmt: skip
    line = writer.add({
        "training_iteration": 1, "num_env_steps_sampled_lifetime": 300,
        "env_runners": {EPISODES_KEY: episodes, "episode_return_mean": 0.0},
        "fault_tolerance": {"num_healthy_workers": 2},
    })  # fmt: skip
    writer.close()
    assert "steps         300" in line and "(3 episodes)" in line
    run = load_run(tmp_path / "metrics.jsonl")
    assert np.array_equal(run.returns, [1.0, -3.0, 2.0])
    assert np.array_equal(run.steps, [100, 200, 300])
    assert np.array_equal(run.complete, [0.0, 0.0, 1.0])


def test_episode_records_of_rllib_results() -> None:
    """RLlib compiles a series of one item to the item and an empty one to NaN."""
    from procgen_entities.rllib.callbacks import EPISODES_KEY
    from procgen_entities.rllib.metrics import episodes_of

    one = {"return": 1.0, "length": 3}
    assert episodes_of({"env_runners": {EPISODES_KEY: one}}) == [one]
    assert episodes_of({"env_runners": {EPISODES_KEY: [one, one]}}) == [one, one]
    assert episodes_of({"env_runners": {EPISODES_KEY: float("nan")}}) == []
    assert episodes_of({"env_runners": {}}) == []


def test_runner_seeds_give_each_runner_its_own_levels() -> None:
    """RLlib would reset runner i with seed + i. An EntityVectorEnv seeded s once seeded its
    procgen groups s, s+1 (neighbouring runners shared levels); its groups' seeds are derived
    now, and set_up_runner still spreads the runners' seeds."""
    from types import SimpleNamespace

    from procgen_entities.gymnasium import EntityVectorEnv
    from procgen_entities.rllib import env_options
    from procgen_entities.rllib.callbacks import runner_seed, set_up_runner

    def level_seeds(env: Any, seed: Any) -> set:
        _, info = env.reset(seed=seed)
        return set(info["level_seed"].tolist())

    options = env_options("bigfish")
    envs = [EntityVectorEnv("bigfish", 8, **options) for _ in range(3)]
    try:
        # RLlib's scheme no longer makes runner 1's second group runner 2's first one
        assert not level_seeds(envs[0], 7) & level_seeds(envs[1], 8)
        seen = []
        for index, env in zip((1, 2), envs):
            set_up_runner(env_runner=SimpleNamespace(worker_index=index), env=env, seed=7,
                          torch_threads=None)  # fmt: skip
            seen.append(level_seeds(env, None))  # RLlib's own reset: seed None
            assert seen[-1] == level_seeds(envs[2], runner_seed(7, index))
        assert not seen[0] & seen[1]
    finally:
        for env in envs:
            env.close()
