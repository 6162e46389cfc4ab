"""Tests of the text dump (procgen_entities.viewer.render and python -m procgen_entities.dump).

Snapshots: every state in tests/data/dump/ (recorded by tools/record_dump_states.py, one per game
plus a few other modes) is rendered as plain text and compared with tests/snapshots/dump/. After
an intended change of the rendering, regenerate the snapshots and review the diff:

    UPDATE_SNAPSHOTS=1 PYTHONPATH=. pytest tests/test_dump.py
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from procgen_entities import GAME_NAMES, GAMES, parse_state
from procgen_entities.games import SPACE_TILE
from procgen_entities.viewer.render import (
    ENTITY_GLYPHS,
    GAME_LOOKS,
    LOOKS,
    TILE_GLYPHS,
    TILE_REFINEMENTS,
    _legend_glyphs,
    choose_view,
    look,
    render_text,
)

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DUMP_DATA = TESTS / "data" / "dump"
SNAPSHOTS = TESTS / "snapshots" / "dump"
UPDATE = os.environ.get("UPDATE_SNAPSHOTS", "") not in ("", "0")
MANIFEST: Dict[str, dict] = json.loads((DUMP_DATA / "manifest.json").read_text())
STATE_NAMES = sorted(MANIFEST)
ROW = re.compile(r"^ *-?\d+ (.*)$")


def load_dump_state(name: str) -> bytes:
    return gzip.decompress((DUMP_DATA / f"{name}.state.gz").read_bytes())


def map_rows(text: str) -> List[str]:
    """The map rows of a rendering (top row first), without their y labels."""
    rows = []
    for line in text.splitlines()[1:]:
        m = ROW.match(line)
        if not m:
            break
        rows.append(m.group(1))
    return rows


def check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / f"{name}.txt"
    if UPDATE:
        SNAPSHOTS.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        pytest.fail(f"snapshot {path} missing; create it with UPDATE_SNAPSHOTS=1")
    expected = path.read_text()
    assert text == expected, (
        f"rendering of {name} differs from {path}; if intended, regenerate with UPDATE_SNAPSHOTS=1"
    )


# -------------------------------------------------------------------------------------------
# Snapshots and rendering invariants (no procgen needed)


def test_every_game_has_a_golden_dump_state() -> None:
    assert {m["game"] for m in MANIFEST.values()} == set(GAME_NAMES)


@pytest.mark.parametrize("name", STATE_NAMES)
def test_snapshot(name: str) -> None:
    batch = parse_state(load_dump_state(name))
    assert batch.game == MANIFEST[name]["game"]
    check_snapshot(name, render_text(batch, entities=True))


@pytest.mark.parametrize("name", ["coinrun", "ninja", "caveflyer", "jumper", "maze_memory"])
def test_snapshot_full_view_of_windowed_games(name: str) -> None:
    batch = parse_state(load_dump_state(name))
    assert choose_view(batch).kind == "window"
    check_snapshot(f"{name}-full", render_text(batch, view_mode="full"))


# The renderings in docs/state-format.md §5.3 (same levels, step 0).
DOC_RENDERINGS = {
    "coinrun": (
        range(0, 32),
        """\
#.................|.........G###
#..................=..=...===###
#........|.S..|....#......######
#.........====.....#......######
#.........####...S.#......######
#.........####=====#......######
#...|.E.C.##########......######
#....=====##########^^^^^^######
#....###############~~~~~~######
#....###############~~~~~~######
#A...###############~~~~~~######
#====###############======######""",
        range(11, -1, -1),
    ),
    "ninja": (
        range(0, 20),
        """\
####################
#####.....##########
#####.....##########
#####.....##########
#####.....##########
#.........##########
#..............#####
#..............#####
#....B.........#####
#..............#####
#...............####
#....####.......####
#A..............####
#####...........####
#####...........####
#####.###......G####
#####.....##########
#####~~~~~~~~~~~####
####################""",
        range(44, 25, -1),
    ),
    "climber": (
        range(0, 20),
        """\
#..................#
#........o.........#
#.========.........#
#.........E........#
#..................#
#.........======...#
#..................#
#..................#
#..................#
#..==========......#
#..................#
#..................#
#............E.....#
#.............o....#
#..........====....#
#..................#
#..............E...#
#..................#
#A.................#
#==================#""",
        range(19, -1, -1),
    ),
}


@pytest.mark.parametrize("name", sorted(DOC_RENDERINGS))
def test_full_render_matches_format_reference(name: str) -> None:
    cols, expected, ys = DOC_RENDERINGS[name]
    batch = parse_state(load_dump_state(name))
    h = batch.grid.shape[1]
    rows = map_rows(render_text(batch, view_mode="full"))
    assert len(rows) == h
    got = [rows[h - 1 - y][cols.start : cols.stop] for y in ys]
    assert "\n".join(got) == expected


@pytest.mark.parametrize("name", ["coinrun", "ninja", "climber"])  # the step-0 dump states
def test_the_header_says_done_0_on_a_fresh_levels_first_state(name: str) -> None:
    """procgen's constructor sets done=1 before any step (gym3's ``first``): the header says
    done=0 there, where no step ended an episode."""
    batch = parse_state(load_dump_state(name))
    assert int(batch.cur_time[0]) == 0 and bool(batch.done[0])
    assert "  step=0  reward=0  done=0  " in render_text(batch).splitlines()[0]


def test_coinrun_terrain_recognisable() -> None:
    batch = parse_state(load_dump_state("coinrun"))
    full = map_rows(render_text(batch, view_mode="full"))
    assert len(full) == 64 and all(len(r) == 64 for r in full)
    assert set(full[-1]) <= {"#", "="} and "=" in full[-1]  # the floor
    assert sum(r.count("A") for r in full) == 1
    assert sum(r.count("G") for r in full) == 1
    window = map_rows(render_text(batch))
    assert len(window) == 13 and all(len(r) == 13 for r in window)  # the agent's 13x13 view
    assert sum(r.count("A") for r in window) == 1


def test_glyph_tables_cover_every_game() -> None:
    """Every entity type and tile class games.py declares has a look, so every id a glyph; the
    legend names come from games.py (or the presentation-only tile names); no legend character
    repeats within a game; LOOKS, GAME_LOOKS and TILE_REFINEMENTS hold no stale names."""
    used = {"Space"}
    for name, game in GAMES.items():
        declared = set(game.entity_types.values()) | set(game.tiles)
        for what in declared:
            assert look(name, what) is not None, (name, what)
        used |= declared
        refined = TILE_REFINEMENTS.get(name, {})
        for sub in refined.values():
            assert look(name, sub) is not None, (name, sub)
            assert sub not in declared, f"{name}: refinement {sub!r} is a games.py name"
        used |= set(refined.values())
        assert set(GAME_LOOKS.get(name, {})) <= declared, name
        for ids in game.tiles.values():
            for tile in ids:
                assert tile in TILE_GLYPHS[name], (name, tile)
        assert SPACE_TILE in TILE_GLYPHS[name]
        assert set(ENTITY_GLYPHS[name]) == set(game.entity_types), name
        glyphs = _legend_glyphs(name)
        assert {g.name for g in glyphs} <= declared | {"Space"} | set(refined.values()), name
        chars = [g.char for g in glyphs]
        assert len(chars) == len(set(chars)), f"{name}: legend characters repeat: {chars}"
        assert all(c.strip() for c in chars), name
    assert set(LOOKS) == used, f"looks no game uses: {sorted(set(LOOKS) - used)}"


def test_renders_every_conftest_golden_state() -> None:
    """Invariants over all states of the parser's golden data (tests/data/*.states.npz)."""
    from conftest import GOLDEN_NAMES, load_golden

    count = 0
    for golden_name in GOLDEN_NAMES:
        golden = load_golden(golden_name)
        for blob in golden.states:
            batch = parse_state(blob)
            h, w = batch.grid.shape[1:]
            for mode in (None, "full"):
                text = render_text(batch, view_mode=mode, entities=mode is None)
                rows = map_rows(text)
                view = choose_view(batch, 0, mode)
                assert len(rows) == view.h and all(len(r) == view.w for r in rows), golden_name
                assert "?" not in "".join(rows), f"{golden_name}: unknown tile or entity"
                assert "\x1b" not in text
                if mode == "full":
                    assert (len(rows), len(rows[0])) == (h, w)
                    assert sum(r.count("A") for r in rows) == 1, golden_name
            count += 1
    assert count > 100


# -------------------------------------------------------------------------------------------
# The command line (subprocesses)


def run_dump(
    *args: str, timeout: float = 120, file_size_limit: Optional[int] = None
) -> subprocess.CompletedProcess:
    """The viewer in a child process (``file_size_limit``: RLIMIT_FSIZE in bytes there, so that
    a write past it fails as on a full disk)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("FORCE_COLOR", None)
    env.pop("NO_COLOR", None)

    def limit() -> None:  # Python ignores SIGXFSZ: the write raises OSError (EFBIG)
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    return subprocess.run(
        [sys.executable, "-m", "procgen_entities.dump", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
        preexec_fn=None if file_size_limit is None else limit,
    )


def assert_usage_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_cli_state_file_piped_has_no_escape_codes(tmp_path: Path) -> None:
    proc = run_dump("--state", str(DUMP_DATA / "coinrun.state.gz"), "--entities")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout
    batch = parse_state(load_dump_state("coinrun"))
    assert proc.stdout == render_text(batch, entities=True) + "\n"


def test_cli_color_always_has_escape_codes() -> None:
    proc = run_dump("--state", str(DUMP_DATA / "heist.state.gz"), "--color", "always")
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" in proc.stdout
    plain = run_dump("--state", str(DUMP_DATA / "heist.state.gz"), "--color", "never")
    assert "\x1b" not in plain.stdout
    assert re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", proc.stdout).split() == plain.stdout.split()


@pytest.mark.live
def test_cli_bare_runs_for_every_game() -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        procs = dict(zip(GAME_NAMES, pool.map(lambda g: run_dump(g), GAME_NAMES)))
    for game, proc in procs.items():
        assert proc.returncode == 0, (game, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert "\x1b" not in proc.stdout
        first = proc.stdout.splitlines()[0]
        assert first.startswith(f"{game}  mode=hard  level=0  step=0"), first
        rows = map_rows(proc.stdout)
        assert rows and sum(r.count("A") for r in rows) == 1, (game, proc.stdout)
        assert "legend: " in proc.stdout


@pytest.mark.live
def test_cli_header_says_done_1_after_the_step_that_ended_an_episode() -> None:
    """done=0 on step 0 of a fresh level; done=1 on the state a step that ended an episode led
    to: procgen's reset (maze's 500-step limit with no-ops: step 0 of the next episode) and
    a terminal state (a checkpoint's episode, the headless engine showing it before its
    reset)."""
    fresh = run_dump("coinrun", "--color", "never")
    assert "  step=0  reward=0  done=0  " in fresh.stdout.splitlines()[0], fresh.stderr
    reset = run_dump("maze", "--steps", "500", "--policy", "noop", "--color", "never")
    assert "  step=0  reward=0  done=1  " in reset.stdout.splitlines()[0], reset.stderr
    played = run_dump("--state", str(ROOT / "docs" / "levels" / "coinrun-saw.txt"), "--policy",
                      str(ROOT / "checkpoints" / "coinrun-15m"), "--color", "never")  # fmt: skip
    assert "  step=66  reward=10  done=1  " in played.stdout.splitlines()[0], played.stderr


@pytest.mark.live
def test_cli_steps_watch_save_and_state_round_trip(tmp_path: Path) -> None:
    for suffix in ("state", "state.gz"):
        saved = tmp_path / f"coinrun.{suffix}"
        args = ("--seed", "7", "--steps", "25", "--entities", "--full")
        first = run_dump("coinrun", *args, "--save", str(saved))
        assert first.returncode == 0, first.stderr
        assert "step=25" in first.stdout.splitlines()[0]
        blob = saved.read_bytes()
        assert (blob[:2] == b"\x1f\x8b") == suffix.endswith(".gz")
        again = run_dump("--state", str(saved), "--entities", "--full")
        assert again.returncode == 0, again.stderr
        assert again.stdout == first.stdout
    # --watch with piped output prints every frame, without control codes.
    watch = run_dump("maze", "--watch", "--steps", "3", "--delay", "0", "--policy", "noop")
    assert watch.returncode == 0, watch.stderr
    assert "\x1b" not in watch.stdout
    headers = [ln for ln in watch.stdout.splitlines() if ln.startswith("maze  ")]
    assert [h.split()[3] for h in headers] == ["step=0", "step=1", "step=2", "step=3"]


def test_cli_unknown_game() -> None:
    proc = run_dump("pong")
    assert_usage_error(proc, "'pong'", *GAME_NAMES)


def test_cli_mode_the_game_lacks() -> None:
    # procgen would abort the process (fassert) for coinrun in extreme mode.
    proc = run_dump("coinrun", "--distribution-mode", "extreme")
    assert_usage_error(proc, "coinrun", "easy", "hard")
    assert "extreme" not in proc.stderr.split("valid modes for coinrun:")[1].split("(")[0]


def test_cli_no_game() -> None:
    assert_usage_error(run_dump(), "--state", "coinrun")


def test_cli_missing_file(tmp_path: Path) -> None:
    assert_usage_error(run_dump("--state", str(tmp_path / "nope.bin")), "nope.bin")


@pytest.mark.parametrize("kind", ["truncated", "truncated_gz", "garbage", "empty", "bad_gzip"])
def test_cli_bad_state_file(tmp_path: Path, kind: str) -> None:
    blob = load_dump_state("ninja")
    path = tmp_path / "bad.state"
    if kind == "truncated":
        path.write_bytes(blob[: len(blob) // 2])
    elif kind == "truncated_gz":
        path.write_bytes(gzip.compress(blob[:-1]))
    elif kind == "garbage":
        path.write_bytes(b"hello, this is not a procgen state\n" * 10)
    elif kind == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(gzip.compress(blob)[:200])
    proc = run_dump("--state", str(path))
    assert_usage_error(proc, str(path))


def test_cli_refuses_fifos_and_devices_without_blocking(tmp_path: Path) -> None:
    """open() of a FIFO blocks until another process opens its other end: --state and --save
    refuse what is not a regular file (a FIFO, a device, a folder) before drawing anything,
    in one line, exit status 2 (a child with a time limit: a hang fails, it does not stall)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    saved = str(DUMP_DATA / "coinrun.state.gz")
    cases = [
        (["--state", str(fifo)], f"cannot read state file {str(fifo)!r}: a FIFO"),
        (["--state", "/dev/zero"], "cannot read state file '/dev/zero': a device"),
        (["--state", saved, "--save", str(fifo)], f"cannot write state file {str(fifo)!r}: a FIFO"),
        (["--state", saved, "--save", "/dev/null"], "'/dev/null': a device, not a regular file"),
        (["--state", saved, "--save", str(tmp_path)], "a folder, not a regular file"),
    ]
    for args, needle in cases:
        assert_usage_error(run_dump(*args, timeout=60), needle)


@pytest.mark.parametrize("suffix", [".state", ".state.gz", ".txt"])
def test_cli_a_failed_save_leaves_the_old_file_whole(tmp_path: Path, suffix: str) -> None:
    """--save writes a temporary file beside the target and renames it over: a write that
    fails part way (here past a file size limit) leaves the old file as it was, and no
    temporary file behind."""
    target = tmp_path / f"level{suffix}"
    first = run_dump("--state", str(DUMP_DATA / "coinrun.state.gz"), "--save", str(target))
    assert first.returncode == 0, first.stderr
    old = target.read_bytes()
    limit = 1024
    assert len(old) > limit
    proc = run_dump("--state", str(DUMP_DATA / "ninja.state.gz"), "--save", str(target),
                    file_size_limit=limit)  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"cannot write {'level' if suffix == '.txt' else 'state'} file" in proc.stderr
    assert target.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]
    again = run_dump("--state", str(DUMP_DATA / "ninja.state.gz"), "--save", str(target))
    assert again.returncode == 0, again.stderr
    assert target.read_bytes() != old and sorted(p.name for p in tmp_path.iterdir()) == [
        target.name
    ]


def test_cli_bad_flag_is_argparse_usage_error() -> None:
    proc = run_dump("coinrun", "--steps", "-3")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    proc = run_dump("coinrun", "--window", "--full")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_steps_are_bounded_by_the_games_longest_episode() -> None:
    """--steps 10**9 played for hours; like a text level header's steps=, --steps is at most the
    game's longest episode (levels.max_steps), refused before anything plays."""
    proc = run_dump("coinrun", "--steps", str(10**9), timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        "python -m procgen_entities.dump: error: --steps 1000000000: more than coinrun's "
        "longest episode (1000 steps), the most one run plays"
    ]
    assert run_dump("maze", "--steps", "500", "--policy", "noop").returncode == 0
