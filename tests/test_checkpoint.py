"""Checkpoints are data (agents/checkpoint.py): the committed ones load without pickle, their numpy
form acts as the torch policy does on real episodes, old pickled folders are refused (and never
run), the converter is exact, and evaluate's errors are one line with exit status 2."""

from __future__ import annotations

import json
import pickle
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, List

import numpy as np
import pytest

from procgen_entities.agents.checkpoint import (
    Checkpoint,
    CheckpointError,
    load_policy,
    make_env,
)
from procgen_entities.agents.numpy_policy import MlpPolicy, Normalizer, read_npz

REPO = Path(__file__).resolve().parents[1]
#: The committed SB3 checkpoints (the data format); checkpoints/bigfish is enn-trainer's RogueNet
#: (tests/test_agents.py plays every committed one).
CHECKPOINTS = [REPO / "checkpoints" / g for g in ("coinrun", "coinrun-15m", "ninja", "climber")]
#: The committed flat-MLP checkpoint (normalizer.npz, one flat observation): the old formats
#: the converter and the error tests start from are of this kind.
FLAT_COINRUN = REPO / "checkpoints" / "coinrun-15m"
#: The committed dict-form checkpoint (the grid policy, normalizer-dict.npz).
DICT_COINRUN = REPO / "checkpoints" / "coinrun"
DATA_FILES = {"env.json", "policy.json", "policy.pt", "policy.npz", "normalizer.npz"}
#: a dict-form policy's (sb3_ppo --grid): per-key statistics
DICT_DATA_FILES = DATA_FILES - {"normalizer.npz"} | {"normalizer-dict.npz"}
#: Blocks torch and SB3 in a child process: what a core install without them sees.
NO_TORCH = """
import importlib.abc, sys
class _Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "stable_baselines3"):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, _Blocked())
"""


class _Payload:
    """A pickle that creates a file when loaded: proof of whether a loader ran it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (open, (str(self.marker), "w"))


def _python(code: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)  # fmt: skip


def _evaluate(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "procgen_entities.evaluate", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO)


def _one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stdout == "", proc.stdout[-2000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _copy(folder: Path, to: Path, names: List[str]) -> Path:
    to.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(folder / name, to / name)
    return to


@pytest.mark.parametrize("folder", CHECKPOINTS, ids=lambda p: p.name)
def test_committed_checkpoints_are_data_that_loads_without_pickle(folder: Path) -> None:
    from procgen_entities.agents.numpy_policy import DictNormalizer

    files = {p.name for p in folder.iterdir()}
    assert files in (DATA_FILES, DICT_DATA_FILES)
    spec = json.loads((folder / "policy.json").read_text())
    weights = read_npz(folder / "policy.npz")  # allow_pickle=False
    assert all(a.dtype == np.float32 for a in weights.values())
    if files == DICT_DATA_FILES:  # the slot values and globals normalised, per key
        dict_stats = DictNormalizer.load(folder / "normalizer-dict.npz")
        assert dict_stats.means and min(dict_stats.counts.values()) > 1e6
    else:
        stats = Normalizer.load(folder / "normalizer.npz")
        assert stats.obs_mean.shape == (spec["observation_size"],) and stats.obs_count > 1e6
    torch = pytest.importorskip("torch")
    state = torch.load(folder / "policy.pt", weights_only=True)
    assert set(state) == set(weights)
    for name, tensor in state.items():
        np.testing.assert_array_equal(tensor.numpy(), weights[name])


@pytest.mark.live
@pytest.mark.parametrize("folder", CHECKPOINTS, ids=lambda p: p.name)
def test_numpy_inference_acts_as_the_torch_policy_on_real_steps(folder: Path) -> None:
    _numpy_acts_as_torch(folder)


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dict-form SB3 run (sb3_ppo --grid: FlatGridExtractor), two tiny updates."""
    pytest.importorskip("stable_baselines3")
    out = tmp_path_factory.mktemp("grid") / "run"
    run = [sys.executable, "-m", "procgen_entities.tools.sb3_ppo", "coinrun", "--grid", "--smoke",
           "--out", str(out)]  # fmt: skip
    proc = subprocess.run(run, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out / "checkpoint"


@pytest.mark.live
def test_numpy_inference_of_the_grid_policy_acts_as_torch(grid_run: Path) -> None:
    # an untrained greedy policy rarely ends an episode in 300 steps; the committed ninja
    # checkpoint (a grid policy) covers the episode ends
    _numpy_acts_as_torch(grid_run, need_ends=False)


def _numpy_acts_as_torch(folder: Path, need_ends: bool = True) -> None:
    """Over 300 steps of 16 envs driven by the torch policy: the numpy logits within 1e-5 of
    torch's and the same greedy action in every env at every step (flat MLP and grid forms)."""
    pytest.importorskip("stable_baselines3")
    from procgen_entities.agents.checkpoint import (
        _numpy_state,
        _torch_state,
        build_sb3_policy,
        load_normalizer,
        read_spec,
        torch_logits,
        wants_dict_observation,
    )
    from procgen_entities.agents.numpy_policy import FlatGridPolicy

    spec, config = read_spec(folder), Checkpoint.load(folder).env
    dict_form = wants_dict_observation(folder)
    env = make_env(config, 16, seed=21, flatten=not dict_form)
    space = env.single_observation_space if dict_form else None
    torch_policy = build_sb3_policy(spec, _torch_state(folder), space)
    numpy_policy: Any = (
        FlatGridPolicy(spec, _numpy_state(folder), list(space.spaces))
        if dict_form
        else MlpPolicy(spec, _numpy_state(folder))
    )
    normalize = load_normalizer(folder)
    greedy_torch = load_policy(folder, backend="torch")
    greedy_numpy = load_policy(folder, backend="numpy")
    obs, _ = env.reset(seed=21)
    worst, ends = 0.0, 0
    for _ in range(300):
        x = normalize(obs)
        reference = torch_logits(torch_policy, x)
        mine = numpy_policy.logits(x)
        worst = max(worst, float(np.abs(reference - mine).max()))
        actions = greedy_torch(obs)
        np.testing.assert_array_equal(actions, reference.argmax(axis=1))
        np.testing.assert_array_equal(greedy_numpy(obs), actions)
        obs, _, terminated, truncated, _ = env.step(actions)
        ends += int((terminated | truncated).sum())
    env.close()
    assert worst < 1e-5 and (ends > 0 or not need_ends)


@pytest.mark.live
@pytest.mark.parametrize("name", ["coinrun", "coinrun-15m"])
def test_the_numpy_backend_plays_without_torch(name: str) -> None:
    """A process that cannot import torch or SB3 evaluates a committed coinrun checkpoint (the
    grid policy, and the flat MLP; auto picks numpy) to the same episodes as the torch backend
    here."""
    pytest.importorskip("stable_baselines3")
    from procgen_entities.agents.evaluation import run_episodes

    folder = REPO / "checkpoints" / name
    code = NO_TORCH + (
        "import json\n"
        "from procgen_entities.agents.checkpoint import Checkpoint, load_policy\n"
        "from procgen_entities.agents.evaluation import run_episodes\n"
        f"folder = {str(folder)!r}\n"
        "e = run_episodes(Checkpoint.load(folder).env, load_policy(folder), 24, 77)\n"
        "assert 'torch' not in sys.modules and 'stable_baselines3' not in sys.modules\n"
        "print(json.dumps([e.lengths.tolist(), e.causes]))\n"
    )
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lengths, causes = json.loads(proc.stdout.strip().splitlines()[-1])
    torch_policy = load_policy(folder, backend="torch")
    mine = run_episodes(Checkpoint.load(folder).env, torch_policy, 24, 77)
    assert lengths == mine.lengths.tolist() and causes == mine.causes
    assert "complete" in causes


@pytest.mark.parametrize("name", ["coinrun", "coinrun-15m"])
def test_a_loaded_policy_says_its_observation_form(name: str) -> None:
    """load_policy's policy carries the form it reads, run_episodes and run_levels build that
    env without being told, and a contradicting ``flatten`` is a ValueError naming both (not
    a shape error inside the policy)."""
    from procgen_entities.agents.checkpoint import wants_dict_observation
    from procgen_entities.agents.evaluation import run_episodes, run_levels
    from procgen_entities.level_files import load_levels

    folder = REPO / "checkpoints" / name
    policy = load_policy(folder, backend="numpy")
    assert policy.flatten is (name == "coinrun-15m") is not wants_dict_observation(folder)
    config = Checkpoint.load(folder).env
    assert len(run_episodes(config, policy, 2, 5).causes) == 2
    with pytest.raises(ValueError, match=f"flatten={policy.flatten}.*flatten={not policy.flatten}"):
        run_episodes(config, policy, 2, 5, flatten=not policy.flatten)
    levels = load_levels([REPO / "docs" / "levels" / "coinrun-saw.txt"])
    with pytest.raises(ValueError, match="observation"):
        run_levels(config, policy, levels, 0, flatten=not policy.flatten)


def test_sampled_numpy_actions_follow_the_softmax() -> None:
    policy = MlpPolicy(
        {"observation_size": 2, "actions": 3, "net_arch": [], "activation": "tanh"},
        {"action_net.weight": np.eye(3, 2, dtype=np.float32),
         "action_net.bias": np.array([0.0, 0.0, np.log(2.0)], np.float32)},
    )  # fmt: skip
    obs = np.tile(np.array([[np.log(3.0), 0.0]], np.float32), (60_000, 1))  # logits ln3, 0, ln2
    counts = np.bincount(policy.act(obs, np.random.default_rng(1)), minlength=3) / len(obs)
    np.testing.assert_allclose(counts, [0.5, 1 / 6, 1 / 3], atol=0.01)
    assert (policy.act(obs) == 0).all()


def _sampled_actions(folder: Path, seed: int, backend: str, torch_seed: int) -> list:
    """The actions of 30 sampled steps of 8 envs (seed 41), torch's global generator reseeded
    first with ``torch_seed``, which a seeded policy must not read."""
    import torch

    from procgen_entities.agents.checkpoint import wants_dict_observation

    torch.manual_seed(torch_seed)
    policy = load_policy(folder, deterministic=False, backend=backend, seed=seed)
    env = make_env(Checkpoint.load(folder).env, 8, seed=41,
                   flatten=not wants_dict_observation(folder))  # fmt: skip
    obs, _ = env.reset(seed=41)
    actions = []
    for _ in range(30):
        actions.append(policy(obs).tolist())
        obs = env.step(np.array(actions[-1]))[0]
    env.close()
    return actions


@pytest.mark.live
@pytest.mark.parametrize(
    ("name", "need"),
    [
        ("coinrun-15m", "stable_baselines3"),
        ("coinrun", "stable_baselines3"),
        ("starpilot", "enn_trainer"),
    ],  # fmt: skip
)
def test_a_sampled_policy_repeats_on_its_seed(name: str, need: str) -> None:
    """A sampled checkpoint's actions depend on ``seed`` alone (evaluate --seed), not on
    torch's global generator, for SB3's torch policy (flat and dict form) and the RogueNet;
    another seed plays other episodes."""
    pytest.importorskip(need)
    folder = REPO / "checkpoints" / name
    backend = "torch" if need == "stable_baselines3" else "auto"
    first = _sampled_actions(folder, 3, backend, torch_seed=100)
    assert _sampled_actions(folder, 3, backend, torch_seed=200) == first
    assert _sampled_actions(folder, 4, backend, torch_seed=100) != first


@pytest.mark.live
@pytest.mark.parametrize("name", ["coinrun-15m", "coinrun"])
def test_both_backends_sample_the_same_actions_from_a_seed(name: str) -> None:
    """On the same observations the torch and numpy backends, seeded alike, draw the same
    actions but where float rounding moves a logit across a draw (rare: at most 1 in 200)."""
    pytest.importorskip("stable_baselines3")
    from procgen_entities.agents.checkpoint import wants_dict_observation

    folder = REPO / "checkpoints" / name
    env = make_env(Checkpoint.load(folder).env, 32, seed=9,
                   flatten=not wants_dict_observation(folder))  # fmt: skip
    policies = [load_policy(folder, deterministic=False, backend=b, seed=11)
                for b in ("torch", "numpy")]  # fmt: skip
    obs, _ = env.reset(seed=9)
    same = total = 0
    for _ in range(40):
        actions = [policy(obs) for policy in policies]
        same += int((actions[0] == actions[1]).sum())
        total += len(actions[0])
        obs = env.step(actions[0])[0]
    env.close()
    assert same >= total * 0.995, (same, total)
    assert len(set(np.concatenate(actions).tolist())) > 1  # sampled, not one greedy action


def _old_format(tmp: Path) -> Path:
    """An old pickled folder (policy.pth, vecnormalize.pkl) made from the committed flat coinrun
    checkpoint, as tools/sb3_ppo.py wrote them before the data format."""
    from stable_baselines3.common.vec_env import VecNormalize

    from procgen_entities.agents.checkpoint import _torch_state, build_sb3_policy, read_spec
    from procgen_entities.gymnasium.sb3 import SB3VecEnv

    source = FLAT_COINRUN
    folder = _copy(source, tmp / "old", ["env.json"])
    build_sb3_policy(read_spec(source), _torch_state(source)).save(str(folder / "policy.pth"))
    stats = Normalizer.load(source / "normalizer.npz")
    venv = VecNormalize(SB3VecEnv(make_env(Checkpoint.load(source).env, 1, 0)))
    stats.apply_to(venv)
    venv.save(str(folder / "vecnormalize.pkl"))
    venv.close()
    return folder


@pytest.mark.live
def test_the_converter_is_exact_and_needs_trust(tmp_path: Path) -> None:
    pytest.importorskip("stable_baselines3")
    folder = _old_format(tmp_path)
    with pytest.raises(CheckpointError, match="--trust-pickle"):
        load_policy(folder)
    convert = ["-m", "procgen_entities.tools.checkpoint", "convert", str(folder)]
    proc = subprocess.run([sys.executable, *convert], capture_output=True, text=True, cwd=REPO,
                          timeout=300)  # fmt: skip
    _one_line_error(proc, "--trust-pickle")
    assert not (folder / "policy.json").exists()
    proc = subprocess.run([sys.executable, *convert, "--trust-pickle", "--remove-pickles"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert {p.name for p in folder.iterdir()} == DATA_FILES
    _same_data_files(folder, FLAT_COINRUN, "normalizer.npz")


def _same_data_files(folder: Path, source: Path, normalizer: str) -> None:
    """A converted folder's weights, statistics and spec equal those the run wrote itself."""
    for name in ("policy.npz", normalizer):
        mine, theirs = read_npz(folder / name), read_npz(source / name)
        assert set(mine) == set(theirs)
        for key in mine:
            np.testing.assert_array_equal(mine[key], theirs[key])
    assert json.loads((folder / "policy.json").read_text()) == json.loads(
        (source / "policy.json").read_text()
    )


def test_pickles_are_refused_and_never_run(tmp_path: Path) -> None:
    """An old-format folder whose pickles would create a file: load_policy and evaluate refuse
    it with the conversion command, and the file is never created."""
    marker = tmp_path / "ran"
    folder = _copy(FLAT_COINRUN, tmp_path / "old", ["env.json"])
    for name in ("vecnormalize.pkl", "policy.pth"):
        (folder / name).write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(CheckpointError) as info:
        load_policy(folder)
    assert "convert" in str(info.value) and "--trust-pickle" in str(info.value)
    _one_line_error(_evaluate(str(folder), "--episodes", "2"), "checkpoint convert", "--trust")
    assert not marker.exists()


@pytest.mark.parametrize("target", ["policy.pt", "policy.npz", "normalizer.npz"])
def test_data_files_holding_pickles_are_refused_and_never_run(tmp_path: Path, target: str) -> None:
    marker = tmp_path / "ran"
    folder = _copy(FLAT_COINRUN, tmp_path / "ckpt", sorted(DATA_FILES))
    if target == "policy.pt":
        (folder / target).write_bytes(pickle.dumps({"action_net.weight": _Payload(marker)}))
        (folder / "policy.npz").unlink()  # the torch loader's fallback
        backend = "torch"
        pytest.importorskip("torch")
    else:
        np.savez(folder / target, obs_mean=np.array([_Payload(marker)], dtype=object))
        backend = "numpy"
    with pytest.raises(CheckpointError):
        load_policy(folder, backend=backend)
    assert not marker.exists()


def _poison(folder: Path, name: str, array: str, value: float) -> None:
    """Set the first value of one array of a checkpoint's file (an .npz, or policy.pt)."""
    if name.endswith(".pt"):
        import torch

        state = torch.load(folder / name, weights_only=True)
        state[array].view(-1)[0] = value
        torch.save(state, folder / name)
        return
    arrays = read_npz(folder / name)
    arrays[array] = arrays[array].copy()
    arrays[array].reshape(-1)[0] = value
    np.savez(folder / name, **arrays)


def _more_saws(folder: Path, normalize: bool = True) -> None:
    """env.json with one more Saw slot than the training had: a larger observation."""
    record = json.loads((folder / "env.json").read_text())
    record["env"]["max_entities"]["Saw"] += 1
    record["normalize"] = normalize
    (folder / "env.json").write_text(json.dumps(record))


#: (checkpoint, file, array, value, backend): weights or statistics that are not finite.
NOT_FINITE = [
    (FLAT_COINRUN, "policy.npz", "mlp_extractor.policy_net.0.weight", np.nan, "numpy"),
    (FLAT_COINRUN, "policy.npz", "action_net.bias", np.inf, "numpy"),
    (FLAT_COINRUN, "policy.pt", "mlp_extractor.policy_net.0.weight", np.nan, "torch"),
    (FLAT_COINRUN, "policy.pt", "action_net.weight", -np.inf, "torch"),
    (FLAT_COINRUN, "normalizer.npz", "obs_mean", np.nan, "numpy"),
    (FLAT_COINRUN, "normalizer.npz", "obs_var", np.nan, "torch"),
    (FLAT_COINRUN, "normalizer.npz", "obs_var", -1.0, "numpy"),
    (DICT_COINRUN, "normalizer-dict.npz", "mean:Saw", np.nan, "numpy"),
    (DICT_COINRUN, "normalizer-dict.npz", "var:global", np.inf, "torch"),
    (DICT_COINRUN, "policy.npz", "features_extractor.net.grid.conv.0.weight", np.nan, "numpy"),
    (DICT_COINRUN, "policy.pt", "mlp_extractor.policy_net.0.bias", np.nan, "torch"),
]


@pytest.mark.parametrize(("source", "name", "array", "value", "backend"), NOT_FINITE,
                         ids=lambda v: getattr(v, "name", str(v)))  # fmt: skip
def test_weights_and_statistics_that_are_not_finite_are_refused_at_load(
    tmp_path: Path, source: Path, name: str, array: str, value: float, backend: str
) -> None:
    """NaN weights made numpy's greedy policy play action 0 every step (the argmax of NaN
    logits: a silent 0%) and torch's raise deep in its first step; NaN statistics made every
    observation NaN. load_policy refuses them, naming the file and the array."""
    if backend == "torch":
        pytest.importorskip("torch")
    folder = _copy(source, tmp_path / "ckpt", sorted(p.name for p in source.iterdir()))
    _poison(folder, name, array, value)
    what = "a negative variance" if value == -1 else ("NaN" if np.isnan(value) else "infinity")
    with pytest.raises(CheckpointError, match=re.escape(f"{folder / name}: array {array!r} "
                                                        f"holds {what}")):  # fmt: skip
        load_policy(folder, backend=backend)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("normalize", [True, False], ids=["normalised", "raw"])
@pytest.mark.parametrize("source", [FLAT_COINRUN, DICT_COINRUN], ids=lambda p: p.name)
def test_an_env_json_whose_observation_the_weights_do_not_fit_is_refused_at_load(
    tmp_path: Path, source: Path, normalize: bool, backend: str
) -> None:
    """Another max_entities in env.json changes the observation's size: one line naming the
    folder and env.json as load_policy reads it, not a numpy broadcast traceback at the first
    step (with or without the normaliser's statistics, whose sizes are the first to differ)."""
    if backend == "torch":
        pytest.importorskip("torch")
    folder = _copy(source, tmp_path / "ckpt", sorted(p.name for p in source.iterdir()))
    _more_saws(folder, normalize)
    with pytest.raises(CheckpointError) as info:
        load_policy(folder, backend=backend)
    message = str(info.value)
    assert "\n" not in message and str(folder) in message and "env.json" in message, message


EVAL_CASES = {
    "corrupt env.json": (lambda f: (f / "env.json").write_text("{\"env\": {\"game\": "), [],
                         "not readable JSON"),
    "partial env.json": (lambda f: (f / "env.json").write_text('{"steps": 5}'), [], '"env"'),
    "env.json without a game": (
        lambda f: (f / "env.json").write_text('{"env": {"tilemap": "columns"}}'), [], "game"),
    "env.json with an unknown keyword": (
        lambda f: (f / "env.json").write_text('{"env": {"game": "coinrun", "colour": 1}}'), [],
        "unknown keys colour"),
    "missing policy files": (lambda f: (f / "policy.json").unlink(), [], "policy.json"),
    "missing weights": (lambda f: [(f / n).unlink() for n in ("policy.pt", "policy.npz")], [],
                        "neither policy.pt nor policy.npz"),
    "missing normaliser": (lambda f: (f / "normalizer.npz").unlink(), [], "normalizer.npz"),
    "NaN weights": (lambda f: _poison(f, "policy.npz", "action_net.weight", np.nan),
                    ["--backend", "numpy"], "policy.npz: array 'action_net.weight' holds NaN"),
    "NaN statistics": (lambda f: _poison(f, "normalizer.npz", "obs_mean", np.nan), [],
                       "normalizer.npz: array 'obs_mean' holds NaN"),
    "max_entities the weights do not fit": (_more_saws, ["--backend", "numpy"],
                                            "observations of 437 values"),
    "bad --mode": (None, ["--mode", "nightmare"], "--mode 'nightmare'"),
    "--seed 2**31": (None, ["--seed", str(2**31)], "--seed"),
    "--episodes 0": (None, ["--episodes", "0"], "--episodes"),
    "--json in a missing folder": (None, ["--json", "/nonexistent/dir/table.json"], "--json"),
    "unknown option": (None, ["--colour"], "unrecognized arguments"),
}  # fmt: skip


@pytest.mark.parametrize("case", EVAL_CASES, ids=list(EVAL_CASES))
def test_evaluate_errors_are_one_line_with_exit_status_2(tmp_path: Path, case: str) -> None:
    """Each bad input is refused before any episode runs (well under the seconds an
    evaluation of 1,000 episodes takes), in one line on stderr, exit status 2."""
    damage, options, needle = EVAL_CASES[case]
    folder = _copy(FLAT_COINRUN, tmp_path / "ckpt", sorted(DATA_FILES))
    if damage is not None:
        damage(folder)
    start = time.perf_counter()
    proc = _evaluate(str(folder), "--episodes", "1000", *options)  # the last --episodes counts
    _one_line_error(proc, needle)
    assert time.perf_counter() - start < 60


def test_evaluate_refuses_a_missing_folder() -> None:
    _one_line_error(_evaluate("/nonexistent/checkpoint"), "not a checkpoint folder")


def test_enn_checkpoints_with_pickled_blobs_are_refused(tmp_path: Path) -> None:
    """hyperstate's legacy snapshots pickle their state: refused before enn-trainer loads."""
    folder = _copy(FLAT_COINRUN, tmp_path / "enn-run", ["env.json"])
    (folder / "enn").mkdir()
    (folder / "enn" / "state.agent.pickle").write_bytes(pickle.dumps(_Payload(tmp_path / "x")))
    with pytest.raises(CheckpointError, match="state.agent.pickle"):
        load_policy(folder)
    assert not (tmp_path / "x").exists()


@pytest.mark.live
def test_resume_with_trust_pickle_converts_then_trains(tmp_path: Path) -> None:
    """sb3_ppo --resume on an old pickled folder: refused without --trust-pickle (test_agents),
    converted and continued with it (no optimizer state in policy.pth: Adam starts afresh)."""
    pytest.importorskip("stable_baselines3")
    folder = _old_format(tmp_path)
    out = tmp_path / "run"
    command = [sys.executable, "-m", "procgen_entities.tools.sb3_ppo", "coinrun", "--smoke",
               "--out", str(out), "--resume", str(folder), "--trust-pickle",
               "--eval-baselines", "none"]  # fmt: skip
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "no optimizer.pt" in proc.stderr
    assert (folder / "policy.json").exists() and (folder / "policy.pth").exists()  # kept
    steps = Checkpoint.load(FLAT_COINRUN).steps
    assert Checkpoint.load(out / "checkpoint").steps == steps + 256


@pytest.mark.live
def test_the_converter_handles_dict_observation_policies(tmp_path: Path, grid_run: Path) -> None:
    """An old pickled folder of a dict-form SB3 policy (sb3_ppo --grid: FlatGridExtractor and
    per-key VecNormalize statistics) converts to the same data files the run wrote itself."""
    from stable_baselines3.common.vec_env import VecNormalize

    from procgen_entities.agents.checkpoint import (
        _torch_state,
        build_sb3_policy,
        convert,
        read_spec,
    )
    from procgen_entities.agents.numpy_policy import DictNormalizer
    from procgen_entities.gymnasium.sb3 import SB3VecEnv, normalized_keys

    source = grid_run
    folder = _copy(source, tmp_path / "old", ["env.json"])
    env = make_env(Checkpoint.load(source).env, 1, 0, flatten=False)
    space = env.single_observation_space
    policy = build_sb3_policy(read_spec(source), _torch_state(source), space)
    policy.save(str(folder / "policy.pth"))
    stats = DictNormalizer.load(source / "normalizer-dict.npz")
    venv = VecNormalize(SB3VecEnv(env), gamma=stats.gamma, norm_obs_keys=normalized_keys(space))
    stats.apply_to(venv)
    venv.save(str(folder / "vecnormalize.pkl"))
    venv.close()
    written = convert(folder)
    assert "normalizer-dict.npz" in written
    _same_data_files(folder, source, "normalizer-dict.npz")


# ---- the size a checkpoint may declare (issue 38 row 6) ----

#: policy.json edits (checkpoint, key, value, what the one-line error names): each declares a
#: network past the limits (agents/checkpoint.py MAX_LAYER_WIDTH, MAX_HIDDEN_LAYERS, and
#: numpy_policy.MAX_VALUES values in all); [12000, 12000] took minutes to build under torch.
OVERSIZED = [
    ("coinrun-15m", "net_arch", [12000, 12000], "net_arch[0] 12000 is not a whole number in 1..4"),
    ("coinrun-15m", "net_arch", [4096] * 8, "more than the 16,777,216 a checkpoint may"),
    ("coinrun-15m", "net_arch", [64] * 9, "net_arch is not a list of at most 8 layer widths"),
    ("coinrun-15m", "net_arch", {"pi": [64], "vf": [0]}, "net_arch.vf[0] 0 is not"),
    ("coinrun-15m", "observation_size", 10**12, "observation_size 1000000000000 is not"),
    ("coinrun", "extractor_kwargs", {"grid_dim": 10**6}, "extractor_kwargs grid_dim 1000000"),
    ("coinrun", "extractor_kwargs", {"cnn": "huge"}, "cnn 'huge' is not one of small, deep"),
    ("coinrun", "extractor_kwargs", {"depth": 3}, "(the keywords of FlatGridExtractor"),
]  # fmt: skip


@pytest.mark.live
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_network_past_the_size_limits_is_refused_before_it_is_built(
    tmp_path: Path, backend: str
) -> None:
    """Each oversized policy.json is one CheckpointError naming the file, the key and the
    value, on both backends, in a child process with a time limit (the torch backend built
    [12000, 12000] for minutes before; the numpy one read the weights first)."""
    if backend == "torch":
        pytest.importorskip("torch")
    folders = []
    for i, (name, key, value, _) in enumerate(OVERSIZED):
        folder = _copy(REPO / "checkpoints" / name, tmp_path / str(i),
                       sorted(p.name for p in (REPO / "checkpoints" / name).iterdir()))  # fmt: skip
        spec = json.loads((folder / "policy.json").read_text())
        spec[key] = value
        (folder / "policy.json").write_text(json.dumps(spec))
        folders.append(str(folder))
    code = f"""
import sys
from procgen_entities.agents.checkpoint import CheckpointError, load_policy
for folder in sys.argv[1:]:
    try:
        load_policy(folder, backend={backend!r})
        print("loaded", folder)
    except CheckpointError as exc:
        print(exc)
"""
    proc = _python(code, *folders, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(OVERSIZED), proc.stdout
    for line, folder, (_, _, _, needle) in zip(lines, folders, OVERSIZED):
        assert line.startswith(f"{folder}/policy.json: ") and needle in line, line


def _zeros_member(archive: Any, name: str, values: int, npy: bool) -> None:
    """A deflated member of ``values`` float32 zeros (a .npy header first when ``npy``): a few
    hundred KB that decompress to 4 bytes a value."""
    with archive.open(name, "w", force_zip64=True) as out:  # the archive's compression
        if npy:
            header = {"descr": "<f4", "fortran_order": False, "shape": (values,)}
            np.lib.format.write_array_header_1_0(out, header)
        chunk = bytes(2**24)
        for _ in range(values * 4 // len(chunk)):
            out.write(chunk)


def test_an_npz_of_compressed_zeros_is_refused_before_it_is_decompressed(tmp_path: Path) -> None:
    """A 1 MB policy.npz of compressed zeros that decompresses to 1 GiB (it took 4.4 GB of
    memory at 4 MB) is refused from its zip and .npy headers, naming the file and the member,
    in a child process whose memory is bounded below what reading it would take."""
    import zipfile

    folder = _copy(FLAT_COINRUN, tmp_path / "ckpt", sorted(DATA_FILES - {"policy.pt"}))
    with zipfile.ZipFile(folder / "policy.npz", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        _zeros_member(z, "action_net.weight.npy", 2**28, npy=True)
    assert (folder / "policy.npz").stat().st_size < 2**23
    code = f"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({2**30 + 2**29}, {2**30 + 2**29}))
from procgen_entities.agents.checkpoint import CheckpointError, load_policy
try:
    load_policy(sys.argv[1], backend="numpy")
except CheckpointError as exc:
    print(exc)
"""
    proc = _python(NO_TORCH + code, str(folder), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith(f"{folder / 'policy.npz'}: member 'action_net.weight.npy' "
                                  "decompresses to 1,073,741,952 bytes"), proc.stdout  # fmt: skip


def test_npz_members_are_held_to_their_headers(tmp_path: Path) -> None:
    """read_npz refuses a member whose .npy header declares more (or fewer) values than its
    uncompressed size holds, one that is no .npy array, and more values than it may read."""
    import zipfile

    small = tmp_path / "small.npz"
    np.savez(small, a=np.zeros(10, np.float32), b=np.zeros(20, np.float32))
    with pytest.raises(ValueError, match="holds more than the 25 values it may"):
        read_npz(small, max_values=25)
    assert set(read_npz(small, max_values=30)) == {"a", "b"}
    lying = tmp_path / "lying.npz"
    with zipfile.ZipFile(lying, "w") as z:
        with z.open("a.npy", "w") as out:  # a header of 2**40 values over 40 bytes
            header = {"descr": "<f4", "fortran_order": False, "shape": (2**40,)}
            np.lib.format.write_array_header_1_0(out, header)
            out.write(bytes(40))
        z.writestr("b.txt", b"not an array")
    with pytest.raises(ValueError, match=r"'a.npy' declares shape \(1099511627776,\) of float32 "
                                         "but holds 40 bytes"):  # fmt: skip
        read_npz(lying)


def test_a_policy_pt_past_its_declared_size_is_refused_unread(tmp_path: Path) -> None:
    """policy.pt is torch.save's zip: its records may decompress to no more than the values
    policy.json declares (8 bytes each, and 1 MiB of pickle), checked before torch reads it."""
    pytest.importorskip("torch")
    import zipfile

    folder = _copy(FLAT_COINRUN, tmp_path / "ckpt", sorted(DATA_FILES))
    with zipfile.ZipFile(folder / "policy.pt", "a", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        _zeros_member(z, "policy/data/99", 2**26, npy=False)  # 256 MiB
    with pytest.raises(CheckpointError, match=re.escape(f"{folder / 'policy.pt'}: 19 records of")):
        load_policy(folder, backend="torch")
    (folder / "policy.pt").write_bytes(b"not a zip")
    with pytest.raises(CheckpointError, match="is not torch.save's zip format"):
        load_policy(folder, backend="torch")


def test_the_declared_sizes_are_torchs(tmp_path: Path) -> None:
    """gymnasium/sizes.py counts each network's state dict as SB3 and torch build it: the flat
    MLP, FlatGridExtractor's two stacks, EntityExtractor with and without attention layers,
    shared or not, net_arch as a list or a dict."""
    pytest.importorskip("stable_baselines3")
    from gymnasium import spaces
    from stable_baselines3.common.policies import ActorCriticPolicy, MultiInputActorCriticPolicy

    from procgen_entities.gymnasium import EntityVectorEnv, sb3
    from procgen_entities.gymnasium.sizes import policy_values

    with EntityVectorEnv("coinrun", 1, grid=True, tilemap="columns") as env:
        grid_space = env.single_observation_space
    flat = spaces.Box(-np.inf, np.inf, (430,), np.float32)
    cases = [
        (None, {}, [64, 32], True), (None, {}, {"pi": [16], "vf": [8, 8]}, False),
        ("FlatGridExtractor", {}, [256, 256], True),
        ("FlatGridExtractor", {"cnn": "deep", "grid_dim": 40}, [32], False),
        ("EntityExtractor", {}, [64], True),
        ("EntityExtractor", {"d_model": 32, "n_heads": 2, "n_layers": 2, "n_queries": 3,
                             "grid_dim": 16}, {"pi": [], "vf": [8]}, False),
    ]  # fmt: skip
    for extractor, kwargs, arch, share in cases:
        common = dict(net_arch=arch, share_features_extractor=share)
        if extractor is None:
            policy = ActorCriticPolicy(flat, spaces.Discrete(15), lambda _: 0.0, **common)
        else:
            policy = MultiInputActorCriticPolicy(
                grid_space, spaces.Discrete(15), lambda _: 0.0, **common,
                features_extractor_class=getattr(sb3, extractor), features_extractor_kwargs=kwargs,
            )  # fmt: skip
        torch_count = sum(t.numel() for t in policy.state_dict().values())
        space = flat if extractor is None else grid_space
        assert policy_values(extractor, kwargs, arch, 15, space) == torch_count, (extractor, arch)
