"""The terminal viewer's drawing: a parsed state as rich text (render.py: the tilemap, entities,
legend and entity table; its glyph tables are the core's, procgen_entities/glyphs.py) and
rollouts as GIF or MP4 (video.py). Needs rich (video.py: Pillow or imageio besides).

Libraries only: the program is ``python -m procgen_entities.dump`` (procgen_entities/tools/dump.py).
"""
