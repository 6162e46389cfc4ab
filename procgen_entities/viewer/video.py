"""Videos of rollouts: procgen's own 64x64 frames (upscaled), optionally beside the entity view,
written as GIF (Pillow) or MP4 (imageio with its ffmpeg plugin). Used by ``dump --video``."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

from procgen_entities.errors import ProcgenEntitiesError

__all__ = ["FORMATS", "VideoError", "check_video_path", "compose", "gif_duration", "write_video"]

FORMATS = (".gif", ".mp4")


class VideoError(ProcgenEntitiesError):
    """A video that cannot be written (the message is one line)."""


def check_video_path(path: str) -> Path:
    """The path if a video can be written there (checked before the rollout runs)."""
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in FORMATS:
        raise VideoError(f"--video {path}: expected a .gif or .mp4 file name")
    if target.is_dir() or not target.parent.is_dir():
        raise VideoError(f"--video {path}: not a file in an existing folder")
    if suffix == ".gif":
        _pillow()
    else:
        _imageio()
    return target


def _pillow():  # type: ignore[no-untyped-def]
    try:
        from PIL import Image
    except ImportError:
        raise VideoError("--video .gif needs Pillow: pip install pillow") from None
    return Image


def _imageio():  # type: ignore[no-untyped-def]
    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        raise VideoError(
            "--video .mp4 needs imageio and imageio-ffmpeg: pip install imageio imageio-ffmpeg "
            "(or write a .gif)"
        ) from None
    return imageio


def _upscale(image: np.ndarray, height: int) -> np.ndarray:
    """Nearest-neighbour resize to ``height`` rows (width in proportion)."""
    h, w = image.shape[:2]
    width = max(1, round(w * height / h))
    rows = np.arange(height) * h // height
    cols = np.arange(width) * w // width
    return image[rows][:, cols]


def compose(frame: np.ndarray, scale: int, beside: Optional[np.ndarray] = None) -> np.ndarray:
    """procgen's frame ``scale`` times larger, and the entity view (``render.cell_image``)
    scaled to the same height to its right, 4 black pixels apart."""
    big = np.repeat(np.repeat(frame, scale, axis=0), scale, axis=1)
    if beside is None:
        return big
    side = _upscale(beside, big.shape[0])
    gap = np.zeros((big.shape[0], 4, 3), dtype=np.uint8)
    return np.concatenate([big, gap, side], axis=1)


def _same_size(frames: Sequence[np.ndarray]) -> List[np.ndarray]:
    """Pad frames (the entity view's width can change) to the largest one, in black."""
    h = max(f.shape[0] for f in frames)
    w = max(f.shape[1] for f in frames)
    out = []
    for f in frames:
        padded = np.zeros((h, w, 3), dtype=np.uint8)
        padded[: f.shape[0], : f.shape[1]] = f
        out.append(padded)
    return out


def gif_duration(fps: float) -> int:
    """Milliseconds per frame in a GIF: 1/fps rounded to GIF's centiseconds (15 fps: 70)."""
    return 10 * max(1, round(100 / fps))


def write_video(path: Path, frames: Sequence[np.ndarray], fps: float = 15.0) -> None:
    """Write RGB frames ([h, w, 3] uint8) as a GIF or an MP4 (by the file name)."""
    if not frames:
        raise VideoError("no frames to write")
    images = _same_size(frames)
    try:
        if path.suffix.lower() == ".gif":
            image_cls = _pillow()
            pictures = [image_cls.fromarray(f) for f in images]
            # GIF counts in centiseconds; Pillow merges a frame equal to the one before into
            # it (adding the durations), so the durations, not the frames, count the steps.
            pictures[0].save(path, save_all=True, append_images=pictures[1:], loop=0,
                             duration=gif_duration(fps), optimize=True)  # fmt: skip
        else:
            imageio = _imageio()
            # ffmpeg's yuv420p needs even sizes.
            even = [f[: f.shape[0] // 2 * 2, : f.shape[1] // 2 * 2] for f in images]
            with imageio.get_writer(path, fps=fps, macro_block_size=1) as writer:
                for f in even:
                    writer.append_data(f)
    except OSError as exc:
        raise VideoError(f"cannot write {path}: {exc.strerror or exc}") from None
