"""Levels you can draw and play: text level files (level_files.py), reset(options={"states":
...}) on EntityVectorEnv, ``dump --state level.txt`` / ``--save level.txt``, ``evaluate --levels
DIR``, and a drawn coinrun level (docs/levels/coinrun-saw.txt) that procgen restores, serializes
and renders as drawn and that the committed agent completes."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import procgen_entities as pe
from procgen_entities import State, StateDecodeError
from procgen_entities.errors import UsageError
from procgen_entities.level_files import (
    HEADER,
    LevelBase,
    LevelError,
    env_options,
    level_file_text,
    load_levels,
    max_steps,
    read_level,
)

ROOT = Path(__file__).resolve().parents[1]
DRAWN = ROOT / "docs" / "levels" / "coinrun-saw.txt"
#: the flat MLP: its recorded plays of the drawn levels (docs/levels.md) include a timeout
CHECKPOINT = ROOT / "checkpoints" / "coinrun-15m"
#: the grid agent, which completes the level without the barrier too
GRID_CHECKPOINT = ROOT / "checkpoints" / "coinrun"
NOOP = 4
#: a saved coinrun state (step 0 of level 21, hard), for tests that need no live procgen
SAVED = ROOT / "tests" / "data" / "dump" / "coinrun.state.gz"


def _run(module: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env,
    )  # fmt: skip


def _one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines() if "error" in ln]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def _child(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter, for what could hang (a blocked open(), billions of
    steps): a hang is a TimeoutExpired here, not a stuck test run."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)  # fmt: skip


def _drawing(text: str) -> list:
    """The grid lines of a text level (header and comments dropped)."""
    return [line for line in text.splitlines() if not line.startswith(";")]


# ---- level files ----


@pytest.mark.live
def test_a_text_level_file_reads_back_to_its_state(tmp_path: Path) -> None:
    base = LevelBase("coinrun", "easy", 5)
    state = State.from_bytes(base.state(tmp_path))
    path = tmp_path / "level.txt"
    path.write_text(level_file_text(state, base))
    assert path.read_text().splitlines()[0] == f"{HEADER} game=coinrun mode=easy seed=5"
    level = read_level(path)
    assert level.base == base
    np.testing.assert_array_equal(level.state.grid, state.grid)
    assert level.state.to_bytes(validate=False) == state.to_bytes(validate=False)
    [loaded] = load_levels([path])
    assert loaded.blob == state.to_bytes(validate=False)
    assert env_options(loaded.state)["start_level"] == 5
    assert env_options(loaded.state)["num_levels"] == 1
    assert env_options(loaded.state)["distribution_mode"] == "easy"

    saved = tmp_path / "state.bin"  # base=FILE: relative to the text level's folder
    saved.write_bytes(state.to_bytes(validate=False))
    other = tmp_path / "over-file.txt"
    other.write_text(level_file_text(state, LevelBase(path="state.bin")))
    assert read_level(other).state.to_bytes(validate=False) == saved.read_bytes()


@pytest.mark.parametrize(
    ("header", "needle"),
    [
        ("", "starts with"),
        (f"{HEADER} game=pong", "pong"),
        (f"{HEADER} game=coinrun seed=-1", "seed"),
        (f"{HEADER} game=coinrun colour=red", "colour=red"),
        (f"{HEADER} game=coinrun policy=mine", "policy"),
        (f"{HEADER} base=a.bin game=coinrun", "stands alone"),
        (f"{HEADER} base=missing.bin", "missing.bin"),
        (f"{HEADER} game=coinrun mode=nightmare", "header mode='nightmare' is not one of coinrun"),
        (f"{HEADER} game=coinrun mode=extreme", "mode='extreme'"),
        (f"{HEADER} game=coinrun seed=\u00b2", "header seed='\u00b2' is not a whole number"),
        (f"{HEADER} game=coinrun seed=\u0663", "seed="),  # an Arabic-Indic 3: int() takes it
        (f"{HEADER} game=coinrun seed={'9' * 5000}", "seed="),
        (f"{HEADER} game=coinrun steps=1001", "header steps='1001' is not a whole number in 0"),
    ],
)
def test_bad_level_files_are_refused_by_name(tmp_path: Path, header: str, needle: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(header + "\n#A#\n")
    with pytest.raises(LevelError, match=needle):
        read_level(path)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(LevelError, match="UTF-8"):
        read_level(path)
    with pytest.raises(LevelError, match="not a procgen get_state blob"):
        path.with_suffix(".bin").write_bytes(b"not a state")
        read_level(path.with_suffix(".bin"))


def test_a_header_takes_no_more_steps_than_the_games_longest_episode(tmp_path: Path) -> None:
    """steps=2147483646 would replay two billion steps each time the level is read (dump
    --state, evaluate --levels): refused at once, naming the file, the field and the value."""
    assert (max_steps("coinrun"), max_steps("maze"), max_steps("bigfish")) == (1000, 500, 6000)
    path = tmp_path / "forever.txt"
    path.write_text(f"{HEADER} game=coinrun mode=easy seed=5 steps=2147483646\n#A#\n")
    child = _child(f"""
        from procgen_entities.level_files import LevelError, read_level
        try:
            read_level({str(path)!r})
        except LevelError as exc:
            print(exc)
        """)  # fmt: skip
    assert child.stdout.strip() == (
        f"{path}: header steps='2147483646' is not a whole number in 0..1000 (coinrun's longest "
        "episode)"
    ), child.stderr
    _one_line_error(_run("procgen_entities.dump", "--state", str(path), timeout=60),
                    str(path), "steps='2147483646'")  # fmt: skip
    with pytest.raises(LevelError, match="longest episode"):  # nor is such a header written
        LevelBase("coinrun", "easy", 5, steps=1001).header()
    assert LevelBase("coinrun", "easy", 5, steps=1000).header().endswith("steps=1000 policy=random")


@pytest.mark.live
def test_dump_saves_text_levels_up_to_the_longest_episode(tmp_path: Path) -> None:
    too_long = tmp_path / "too-long.txt"
    proc = _run("procgen_entities.dump", "maze", "--steps", "501", "--save", str(too_long))
    _one_line_error(proc, str(too_long), "steps=501", "maze's longest episode (500 steps)")
    assert proc.stdout == "" and not too_long.exists()  # refused before the rollout
    longest = tmp_path / "longest.txt"
    proc = _run("procgen_entities.dump", "maze", "--steps", "500", "--policy", "noop",
                "--color", "never", "--save", str(longest))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert read_level(longest).base == LevelBase("maze", "hard", 0, 500, "noop")


def test_fifos_and_devices_are_refused_not_waited_on(tmp_path: Path) -> None:
    """open() of a FIFO blocks until a writer comes: a level, a saved state or a header's
    base=FILE that names one is refused (as /dev/zero, which reads without end), in a child
    process with a time limit."""
    os.mkfifo(tmp_path / "pipe.txt")
    os.mkfifo(tmp_path / "pipe.state")
    (tmp_path / "over-pipe.txt").write_text(f"{HEADER} base=pipe.state\n#A#\n")
    paths = [str(tmp_path / name) for name in ("pipe.txt", "pipe.state", "over-pipe.txt")]
    child = _child(f"""
        from procgen_entities.level_files import LevelError, read_level
        for path in {[*paths, "/dev/zero"]!r}:
            try:
                read_level(path)
            except LevelError as exc:
                print(exc)
        """)  # fmt: skip
    lines = child.stdout.splitlines()
    assert len(lines) == 4, child.stderr
    for line, path, kind in zip(lines, [*paths, "/dev/zero"], ["FIFO"] * 3 + ["device"]):
        assert path in line and f"a {kind}, not a regular file" in line, line
    assert "pipe.state" in lines[2]  # the base that is a FIFO, named in its level's error


def test_a_saved_text_level_always_reads_back(tmp_path: Path) -> None:
    """dump --state FILE --save level.txt names FILE in the header: quoted where it needs it, and
    refused (nothing written) where no one-line UTF-8 header can hold it."""
    blob = gzip.decompress(SAVED.read_bytes())
    quoted = tmp_path / 'it\'s a "saved" state #1.bin'
    quoted.write_bytes(blob)
    level = tmp_path / "level.txt"
    proc = _run("procgen_entities.dump", "--state", str(quoted), "--save", str(level))
    assert proc.returncode == 0, proc.stderr
    assert read_level(level).state.to_bytes(validate=False) == blob
    for name in ("two\nlines.bin", "carriage\rreturn.bin", "sep\u2028arator.bin",
                 os.fsdecode(b"latin-1 \xe9.bin")):  # fmt: skip
        odd = tmp_path / name
        odd.write_bytes(blob)
        saved = tmp_path / "odd.txt"
        proc = _run("procgen_entities.dump", "--state", str(odd), "--save", str(saved))
        _one_line_error(proc, str(saved), "cannot be written in a text level's one-line")
        assert not saved.exists()


@pytest.mark.live
def test_a_drawing_procgen_would_not_play_is_refused_before_procgen_sees_it() -> None:
    text = DRAWN.read_text()
    level = read_level(DRAWN)
    assert level.state.game == "coinrun"
    bad = text.replace("#A....CC", "#AAA..CC")
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"two-players-{os.getpid()}.txt"
    path.write_text(bad)
    try:
        with pytest.raises(LevelError, match="exactly one player"):
            read_level(path)
    finally:
        path.unlink()


# ---- reset(options={"states": ...}) ----


@pytest.mark.live
def test_reset_with_states_is_set_states_through_the_standard_api() -> None:
    from procgen_entities.gymnasium import EntityVectorEnv

    with EntityVectorEnv("coinrun", 2, seed=3, distribution_mode="easy") as env:
        env.reset(seed=3)
        for _ in range(20):
            env.step(np.array([7, 8]))
        saved = env.get_states()
        expected = env.set_states(saved)
        for _ in range(5):
            env.step(np.array([NOOP, NOOP]))
        assert env.get_states() != saved
        obs, info = env.reset(options={"states": [saved[0], State.from_bytes(saved[1])]})
        assert env.get_states() == saved
        for name in obs:
            np.testing.assert_array_equal(obs[name], expected[name], err_msg=name)
        assert set(info) >= {"level_seed", "dropped_entities"}

        edited = State.from_bytes(saved[0])
        edited.entities["type"][-1] = 77  # a type coinrun never has
        with pytest.raises(StateDecodeError, match="entity.type = 77"):
            env.reset(options={"states": [saved[0], edited]})
        assert env.get_states() == saved  # refused: no env changed
        with pytest.raises(UsageError, match="no seed"):
            env.reset(seed=1, options={"states": saved})
        with pytest.raises(UsageError, match="sequence"):
            env.reset(options={"states": saved[0]})
        with pytest.raises(TypeError, match="get_state bytes"):
            env.reset(options={"states": [saved[0], 5]})
        with pytest.raises(ValueError, match="expected 2 states"):
            env.reset(options={"states": saved[:1]})
        assert env.get_states() == saved


# ---- the drawn coinrun level, procgen and the committed agent ----


@pytest.mark.live
def test_a_drawn_coinrun_level_is_what_procgen_plays_and_the_agent_completes_it() -> None:
    """docs/levels/coinrun-saw.txt (ground, crates before a step, a saw, the goal): restored
    through reset(options={"states": ...}), it is what procgen itself serializes and renders
    after set_state, and the committed agent (greedy, numpy inference) reaches the goal."""
    from procgen_entities.agents.checkpoint import Checkpoint, load_policy, make_env
    from procgen_entities.procgen_envs import make_procgen_env

    [level] = load_levels([DRAWN])
    assert level.blob is not None
    drawing = _drawing(DRAWN.read_text())
    assert pe.level_to_text(level.state).splitlines() == drawing  # the text is the level
    options = env_options(level.state)

    procgen = make_procgen_env("coinrun", 1, **options)
    procgen.callmethod("set_state", [level.blob])
    assert procgen.callmethod("get_state")[0] == level.blob
    config = Checkpoint.load(CHECKPOINT).env
    env = make_env(config, 1, 0, autoreset_mode="NextStep", **options)
    try:
        obs, _ = env.reset(options={"states": [level.blob]})
        assert env.get_states()[0] == level.blob
        env.step(np.array([NOOP]))
        procgen.act(np.array([NOOP], dtype=np.int32))
        _, frames, _ = procgen.observe()
        np.testing.assert_array_equal(env.render()[0], frames["rgb"][0])  # procgen's frame
        assert env.get_states()[0] == procgen.callmethod("get_state")[0]

        obs, _ = env.reset(options={"states": [level.blob]})
        policy = load_policy(CHECKPOINT, backend="numpy")
        timeout, steps = int(level.state.scalars["timeout"]), 0
        while steps < timeout:
            obs, reward, terminated, truncated, info = env.step(policy(obs))
            steps += 1
            if terminated[0] or truncated[0]:
                break
        assert bool(info["prev_level_complete"][0]), f"episode ended at step {steps}, not the goal"
        assert reward[0] == 10.0 and not truncated[0]
        assert steps == 66  # measured (greedy is deterministic); the time limit is 1,000
    finally:
        env.close()
        procgen.close()


# ---- the command lines ----


@pytest.mark.live
def test_dump_saves_a_text_level_and_draws_and_plays_it(tmp_path: Path) -> None:
    level = tmp_path / "level.txt"
    first = _run("procgen_entities.dump", "coinrun", "--mode", "easy", "--seed", "5",
                 "--color", "never", "--full", "--save", str(level))  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert level.read_text().splitlines()[0] == f"{HEADER} game=coinrun mode=easy seed=5"
    again = _run("procgen_entities.dump", "--state", str(level), "--color", "never", "--full")
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout

    drawing = level.read_text().replace("#A..", "#A.#")  # a wall two tiles before the player
    edited = tmp_path / "edited.txt"
    edited.write_text(drawing)
    shown = _run("procgen_entities.dump", "--state", str(edited), "--color", "never", "--full")
    assert shown.returncode == 0, shown.stderr
    assert "#A.#" in shown.stdout and "#A.." not in shown.stdout

    played = _run("procgen_entities.dump", "--state", str(edited), "--steps", "30",
                  "--policy", "noop", "--color", "never", "--full")  # fmt: skip
    assert played.returncode == 0, played.stderr
    assert "step=30" in played.stdout.splitlines()[0]
    agent = _run("procgen_entities.dump", "--state", str(DRAWN), "--policy", str(CHECKPOINT),
                 "--color", "never")  # fmt: skip
    assert agent.returncode == 0, agent.stderr
    assert "level complete after 66 steps, return 10" in agent.stderr

    resaved = tmp_path / "sub" / "resaved.txt"  # a base=FILE stays right from another folder
    resaved.parent.mkdir()
    blob = tmp_path / "level.state"
    assert _run("procgen_entities.dump", "--state", str(level), "--save", str(blob)).returncode == 0
    assert _run("procgen_entities.dump", "--state", str(blob), "--save",
                str(resaved)).returncode == 0  # fmt: skip
    assert resaved.read_text().splitlines()[0] == f"{HEADER} base=../level.state"
    assert read_level(resaved).state.to_bytes(validate=False) == blob.read_bytes()


@pytest.mark.live
def test_dump_refuses_a_text_save_it_cannot_rebuild_before_playing(tmp_path: Path) -> None:
    proc = _run("procgen_entities.dump", "coinrun", "--policy", str(CHECKPOINT), "--save",
                str(tmp_path / "x.txt"))  # fmt: skip
    _one_line_error(proc, "x.txt", "save a state file")
    assert proc.stdout == "" and not (tmp_path / "x.txt").exists()
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{HEADER} game=coinrun mode=easy seed=5\n#A#\n")
    _one_line_error(_run("procgen_entities.dump", "--state", str(bad)), "rows")


@pytest.mark.live
@pytest.mark.parametrize("batch", ["256", "1"])  # one env for the 3 levels, or one env each
def test_evaluate_levels_reports_each_level(tmp_path: Path, batch: str) -> None:
    folder = tmp_path / "levels"
    folder.mkdir()
    text = DRAWN.read_text()
    (folder / "a-drawn.txt").write_text(text)
    (folder / "b-no-barrier.txt").write_text(text.replace("#......|", "#......."))
    (folder / "c-saved.state").write_bytes(load_levels([DRAWN])[0].blob or b"")
    (folder / ".hidden").write_text("not a level")
    out = tmp_path / "levels.json"
    proc = _run("procgen_entities.evaluate", str(CHECKPOINT), "--levels", str(folder),
                "--backend", "numpy", "--json", str(out), "--batch", batch)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()[2:-1]}
    assert rows == {
        "a-drawn.txt": ["complete", "10.00", "66"],
        "b-no-barrier.txt": ["timeout", "0.00", "1000"],
        "c-saved.state": ["complete", "10.00", "66"],
    }
    assert proc.stdout.splitlines()[-1] == "completion 66.7% return 6.67 over 3 levels"
    table = json.loads(out.read_text())
    assert table["levels"]["b-no-barrier.txt"] == {
        "complete": False, "end": "timeout", "return": 0.0, "length": 1000
    }  # fmt: skip


@pytest.mark.live
def test_the_grid_agent_completes_the_level_without_its_barrier(tmp_path: Path) -> None:
    """docs/levels.md: the 25M marked-grid agent, which sees the terrain as an image, completes the
    drawn level and the one without the barrier (the flat MLP stands there until the limit)."""
    folder = tmp_path / "levels"
    folder.mkdir()
    text = DRAWN.read_text()
    (folder / "a-drawn.txt").write_text(text)
    (folder / "b-no-barrier.txt").write_text(text.replace("#......|", "#......."))
    proc = _run("procgen_entities.evaluate", str(GRID_CHECKPOINT), "--levels", str(folder),
                "--backend", "numpy")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines()[2:-1]}
    assert rows == {
        "a-drawn.txt": ["complete", "10.00", "74"],
        "b-no-barrier.txt": ["complete", "10.00", "72"],
    }


@pytest.mark.live
def test_evaluate_levels_refuses_bad_folders(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    evaluate = ("procgen_entities.evaluate", str(CHECKPOINT), "--backend", "numpy", "--levels")
    _one_line_error(_run(*evaluate, str(empty)), "no level files")
    _one_line_error(_run(*evaluate, str(tmp_path / "nope")), "not a folder")
    other = tmp_path / "other"
    other.mkdir()
    maze = LevelBase("maze", "easy", 1)
    (other / "maze.txt").write_text(level_file_text(State.from_bytes(maze.state(other)), maze))
    _one_line_error(_run(*evaluate, str(other)), "maze.txt is a maze level", "plays coinrun")


# ---- bounded work from a folder of levels (issue 38 row 7) ----


@pytest.mark.live
def test_levels_are_validated_in_batches_within_bounded_memory(tmp_path: Path) -> None:
    """300 copies of a valid level validated in one trial-restore env of 900 games took ~1.8 GB
    more address space (1,000 files: 3.3 GB; 10,000 under a 6 GB limit ended in "procgen crashed
    (SIGABRT)"); in batches of VALIDATE_BATCH they fit 1.3 GB over what reading them took, in a
    child process whose address space is bounded so (the trial restore's fork inherits it)."""
    for i in range(300):
        (tmp_path / f"level-{i:03d}.state.gz").write_bytes(SAVED.read_bytes())
    proc = _child(f"""
        import resource
        from procgen_entities.level_files import level_paths, read_level, validate
        levels = [read_level(p) for p in level_paths({str(tmp_path)!r})]
        with open("/proc/self/status") as f:
            size = next(int(line.split()[1]) for line in f if line.startswith("VmSize")) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size + 1300 * 2**20, size + 1300 * 2**20))
        validate(levels)
        print(sum(level.blob is not None for level in levels))
    """, timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["300"]


@pytest.mark.live
def test_a_folder_of_more_level_files_than_the_limit_is_refused(tmp_path: Path) -> None:
    """At most MAX_LEVEL_FILES (10,000) level files in a folder: one line naming the folder and
    the limit, before any file is read (every file here is empty, unreadable as a level)."""
    from procgen_entities.level_files import MAX_LEVEL_FILES, level_paths

    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(MAX_LEVEL_FILES + 1):
        (folder / f"{i:05d}.state").touch()
    with pytest.raises(LevelError, match=f"holds more than {MAX_LEVEL_FILES} level files"):
        load_levels(level_paths(folder))
    evaluate = ("procgen_entities.evaluate", str(CHECKPOINT), "--backend", "numpy", "--levels")
    _one_line_error(_run(*evaluate, str(folder)), str(folder), "more than 10000 level files")
    (folder / "00000.state").unlink()
    assert len(level_paths(folder)) == MAX_LEVEL_FILES
