#!/usr/bin/env bash
# The parser, engine, Gymnasium, tilemap and viewer tests on the other Pythons this machine has
# (pyenv's or on PATH): 3.12 (procgen-mirror, numpy 1) and 3.13 (procgen-gym, numpy 2), each in a
# fresh venv made with `pip install .` (no entity-gym there: its ragged-buffer has no wheels). A
# missing interpreter is skipped with a message. Timings go to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TESTS=(tests/test_parse_golden.py tests/test_parse_errors.py tests/test_parse_fuzz.py
       tests/test_parse_live.py tests/test_engine_builds.py tests/test_gymnasium.py
       tests/test_tilemap.py tests/test_dump.py)
# 3.12's procgen-mirror has 3.11's game code in another build: what differs is the build (its
# layout from its own DWARF, the engine's checks) and the live parse, so only those run there
# (CI's time: the whole list on both took 17.7 minutes)
TESTS_312=(tests/test_parse_live.py tests/test_engine_builds.py tests/test_gymnasium.py)

find_python() {  # $1: 3.12 -> a python3.12 executable, or nothing
    local found
    found=$(command -v "python$1" 2>/dev/null || true)
    if [ -n "$found" ] && ! "$found" -c "" >/dev/null 2>&1; then
        found=""  # e.g. a pyenv shim for a version pyenv does not select
    fi
    if [ -z "$found" ]; then
        found=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$1".*/bin/"python$1" 2>/dev/null \
            | sort -V | tail -1 || true)
    fi
    echo "$found"
}

for version in 3.12 3.13; do
    python=$(find_python "$version")
    if [ -z "$python" ]; then
        echo "other_pythons: SKIP Python $version (no python$version on PATH or under pyenv)"
        continue
    fi
    work=$(mktemp -d)
    start=$(date +%s)
    "$python" -m venv "$work/venv"
    "$work/venv/bin/pip" install -q "$ROOT" "pytest>=7" "hypothesis>=6" 2>&1 \
        | { grep -v "is ignored: it is neither" || true; }
    installed=$(date +%s)
    echo "other_pythons: Python $version venv + pip install . took $((installed - start)) s"
    cp -r tests "$work/tests"
    cp pyproject.toml "$work/"  # pytest's settings (filterwarnings=error, markers)
    # the viewer tests play committed levels with a committed agent (its numpy policy)
    mkdir -p "$work/docs" && cp -r docs/levels "$work/docs/" && cp -r checkpoints "$work/"
    # Run from the copy so that the installed package, not the source tree, is imported; a fresh
    # cache directory, so that every unknown build's layout is derived from its DWARF here.
    (cd "$work" && "$work/venv/bin/python" -c "
import numpy, gymnasium, procgen_entities.backends as b
print('other_pythons:', 'numpy', numpy.__version__, 'gymnasium', gymnasium.__version__,
      'backend', b.backend_name())")
    (cd "$work" && XDG_CACHE_HOME="$work/cache" \
        HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}" \
        "$work/venv/bin/python" -m pytest -p no:cacheprovider -q -o addopts="-ra" \
        $([ "$version" = 3.12 ] && echo "${TESTS_312[@]}" || echo "${TESTS[@]}") \
        -W ignore::pytest.PytestUnknownMarkWarning)
    echo "other_pythons: Python $version tests took $(($(date +%s) - installed)) s"
    rm -rf "$work"
done
