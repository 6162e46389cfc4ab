"""The old path of :mod:`procgen_entities.viewer.video` (moved from tools/): its names are a
contract, so this path re-exports them (tests/test_layers.py: they are the same objects)."""

from procgen_entities.viewer.video import (
    FORMATS,
    VideoError,
    check_video_path,
    compose,
    gif_duration,
    write_video,
)

__all__ = [
    "FORMATS",
    "VideoError",
    "check_video_path",
    "compose",
    "gif_duration",
    "write_video",
]
