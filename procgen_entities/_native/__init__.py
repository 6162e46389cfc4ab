"""The Cython bindings of the C core (csrc/): one extension per area and one ``.pxd`` per C header.

- ``_parser``: the state parser (GameSpec, parse_batch, read_game_name, the scalar tables)
- ``_writer``: the state writer (split_state, write_states)
- ``_tilemap``: the tilemap kernels (TileSpec, convert, class_images)
- ``_collector``: state sets, live games, padding and the observation builder
- ``_status``: the one mapping of a C status to its exception (``check_status``)

Each ``.pxd`` named after a header (``state_parser.pxd`` for csrc/state_parser.h, ...) mirrors it
line for line, so every enum value and size limit the Python side uses comes from C
(tests/test_native.py). Nothing here decides anything: the core modules (parse.py, state.py,
stepper.py, tilemap.py, ...) import these extensions directly.
"""
