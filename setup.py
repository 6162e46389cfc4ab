"""Build the C extensions.

Environment switches (read at build time):
  PROCGEN_ENTITIES_DEBUG=1      -O0 -g3, assertions on
  PROCGEN_ENTITIES_SANITIZE=1   -O1 -g with AddressSanitizer + UndefinedBehaviorSanitizer
                                (run with LD_PRELOAD of libasan, see .ci/run)
"""

import os

from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("PROCGEN_ENTITIES_DEBUG", "") not in ("", "0")
SANITIZE = os.environ.get("PROCGEN_ENTITIES_SANITIZE", "") not in ("", "0")

compile_args = ["-std=c99", "-Wall", "-Wextra", "-Wno-unused-function", "-Wno-unused-parameter"]
link_args: list = []
macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
if SANITIZE:
    sanitizers = "-fsanitize=address,undefined"
    compile_args += ["-O1", "-g", "-fno-omit-frame-pointer", sanitizers,
                     "-fno-sanitize-recover=undefined"]
    link_args += [sanitizers]
elif DEBUG:
    compile_args += ["-O0", "-g3", "-UNDEBUG"]
else:
    compile_args += ["-O3"]
    macros.append(("NDEBUG", "1"))


def extension(name, sources, libraries=()):
    """procgen_entities._native.<name> from its .pyx and the C sources it links."""
    return Extension(
        f"procgen_entities._native.{name}",
        [f"procgen_entities/_native/{name}.pyx", *(f"csrc/{s}" for s in sources)],
        include_dirs=["csrc"],
        extra_compile_args=compile_args,
        extra_link_args=link_args,
        define_macros=macros,
        libraries=list(libraries) + ["m"],
    )


EXTENSIONS = [
    # the one C status -> exception mapping every other extension cimports (check_status)
    extension("_status", ["state_parser.c", "tilemap.c"]),
    extension("_parser", ["state_parser.c"]),
    extension("_writer", ["state_parser.c", "state_writer.c"]),
    extension("_tilemap", ["tilemap.c"]),
    extension("_collector", ["state_parser.c", "state_set.c", "thread_pool.c", "live_game.c",
                             "padding.c", "tilemap.c", "observation.c", "episodes.c"],
              ["pthread"]),
]

setup(
    ext_modules=cythonize(
        EXTENSIONS,
        language_level=3,
        compiler_directives={"boundscheck": DEBUG or SANITIZE, "wraparound": False,
                             "cdivision": True, "embedsignature": True},
    ),
)
