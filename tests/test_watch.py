"""Watching an agent: ``python -m procgen_entities.dump GAME --policy DIR`` with --watch and
--video, on the committed checkpoints and real procgen levels."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.live
REPO = Path(__file__).resolve().parents[1]
COINRUN = str(REPO / "checkpoints" / "coinrun")
README_GIF = REPO / "docs" / "coinrun-agent.gif"
#: How the README's GIF was made (and is remade by the test below).
README_GIF_ARGS = ("coinrun", "--policy", "checkpoints/coinrun", "--seed", "0", "--beside",
                   "--scale", "3")  # fmt: skip
#: How long checkpoints/coinrun takes to complete level 0 (one frame per state, the first too).
LEVEL0_STEPS = 118
LEVEL0_END = f"level complete after {LEVEL0_STEPS} steps, return 10"
STEP_MS = 70  # viewer/video.py's GIF frame duration at 15 fps
HEADER = re.compile(r"^coinrun  mode=easy  level=0  step=(\d+) ", re.M)


def dump(*args: str, prelude: str = "") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    code = f"{prelude}\nimport sys\nfrom procgen_entities.dump import main\nsys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env=env)  # fmt: skip


def gif_frames(path: Path) -> list:
    """Every step's frame of a GIF (Pillow writes a frame equal to the one before as a longer
    duration of that one: unrolled here by the 70 ms a step lasts)."""
    from PIL import Image

    with Image.open(path) as image:
        assert image.format == "GIF"
        frames = []
        for k in range(image.n_frames):
            image.seek(k)
            repeats, rest = divmod(image.info["duration"], STEP_MS)
            assert rest == 0 and repeats >= 1
            frames.extend([np.asarray(image.convert("RGB"))] * repeats)
    return frames


def test_policy_video_writes_a_gif_of_every_step(tmp_path: Path) -> None:
    """10 steps: the first frame and one per step, procgen's 64x64 frame 4x (the default); with
    --beside the entity view to its right at the same height."""
    pytest.importorskip("PIL")
    plain, beside = tmp_path / "plain.gif", tmp_path / "beside.gif"
    proc = dump("coinrun", "--policy", COINRUN, "--steps", "10", "--video", str(plain))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"stopped after 10 steps, return 0; 11 frames in {plain}" in proc.stderr
    frames = gif_frames(plain)
    assert len(frames) == 11 and frames[0].shape == (256, 256, 3)
    assert not np.array_equal(frames[0], frames[-1])  # the agent moved
    proc = dump("coinrun", "--policy", COINRUN, "--steps", "10", "--video", str(beside),
                "--beside", "--scale", "2")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    wide = gif_frames(beside)
    assert len(wide) == 11 and wide[0].shape[0] == 128 and wide[0].shape[1] > 128 + 64
    # The left part is procgen's frame at scale 2: every 2x2 block one colour.
    left = wide[0][:, :128].astype(int)
    assert (left[::2, ::2] == left[1::2, 1::2]).all()


def test_the_readme_gif_is_what_dump_makes(tmp_path: Path) -> None:
    """docs/coinrun-agent.gif is the committed coinrun agent completing level 0, remade here
    frame for frame by the command README_GIF_ARGS (plus --video)."""
    pytest.importorskip("PIL")
    assert README_GIF.name in (REPO / "README.md").read_text()
    assert README_GIF.stat().st_size < 1_000_000
    remade = tmp_path / "agent.gif"
    proc = dump(*README_GIF_ARGS, "--video", str(remade))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"checkpoints/coinrun: {LEVEL0_END}" in proc.stderr
    committed, mine = gif_frames(README_GIF), gif_frames(remade)
    assert len(committed) == len(mine) == LEVEL0_STEPS + 1
    for a, b in zip(committed, mine):
        np.testing.assert_array_equal(a, b)


def test_watch_piped_prints_plain_frames_until_the_episode_ends() -> None:
    """Piped, --watch prints each state as plain text (no escape codes); a checkpoint plays
    its episode to the end (coinrun level 0: completed in LEVEL0_STEPS steps) and stops."""
    proc = dump("coinrun", "--policy", COINRUN, "--watch", "--entities")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "\x1b" not in proc.stdout and "\x1b" not in proc.stderr
    steps = [int(s) for s in HEADER.findall(proc.stdout)]
    assert steps == list(range(LEVEL0_STEPS + 1))
    assert proc.stdout.count("Player") >= LEVEL0_STEPS + 1  # the entity table of every frame
    assert LEVEL0_END in proc.stderr


def test_watching_needs_no_torch(tmp_path: Path) -> None:
    """With torch and SB3 unimportable, the checkpoint plays the same episode (numpy)."""
    pytest.importorskip("PIL")
    blocker = (
        "import importlib.abc, sys\n"
        "class B(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('torch', 'stable_baselines3'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, B())\n"
        "import atexit\n"
        "atexit.register(lambda: print('torch imported:', 'torch' in sys.modules))\n"
    )
    video = tmp_path / "agent.gif"
    proc = dump(*README_GIF_ARGS, "--video", str(video), prelude=blocker)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("torch imported: False")
    assert LEVEL0_END in proc.stderr
    for a, b in zip(gif_frames(video), gif_frames(README_GIF)):
        np.testing.assert_array_equal(a, b)


def test_the_builtin_policies_make_videos_too(tmp_path: Path) -> None:
    pytest.importorskip("PIL")
    video = tmp_path / "noop.gif"
    proc = dump("coinrun", "--policy", "noop", "--steps", "5", "--video", str(video))
    assert proc.returncode == 0, proc.stderr[-2000:]
    frames = gif_frames(video)
    assert len(frames) == 6 and frames[0].shape == (256, 256, 3)
    bad = dump("coinrun", "--scale", "0", "--video", str(video))  # argparse's own usage error
    assert bad.returncode == 2 and "--scale" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("coinrun", "--policy", str(REPO / "checkpoints" / "ninja")), "plays ninja, not coinrun"),
        (("coinrun", "--policy", "nowhere"), "expected random, noop or a checkpoint folder"),
        (("coinrun", "--policy", str(REPO / "docs")), "not a checkpoint folder"),
        (("coinrun", "--video", "agent.avi"), "expected a .gif or .mp4"),
        (("coinrun", "--video", "/nonexistent/agent.gif"), "not a file in an existing folder"),
        (("coinrun", "--policy", COINRUN, "--mode", "memory"), "no 'memory' distribution mode"),
    ],
)
def test_watch_errors_are_one_line(args: tuple, needle: str) -> None:
    proc = dump(*args)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert needle in lines[0], lines[0]
