#!/usr/bin/env bash
# Build the extensions with AddressSanitizer + UndefinedBehaviorSanitizer into a separate
# folder and run the parser, fuzz, tilemap, vec env, engine, restore, Gymnasium, state writer,
# grid boxes and concurrency (threads, fork, mutated buffers) tests against that build (not
# the 10,200-blob restore fuzz, slow under ASan, nor the SB3 test: its subprocess loads procgen
# with RTLD_DEEPBIND, which the ASan runtime refuses; the concurrency tests' children load it
# as conftest.py does).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
PY=$(cd "$VENV" && pwd)/bin/python
OUT=$(mktemp -d)
cp -r procgen_entities csrc tests setup.py pyproject.toml README.md "$OUT"/
rm -f "$OUT"/procgen_entities/_native/*.so "$OUT"/procgen_entities/_native/*.c
(cd "$OUT" && PROCGEN_ENTITIES_SANITIZE=1 "$PY" setup.py -q build_ext --inplace >build.log 2>&1) \
    || { tail -30 "$OUT/build.log"; exit 1; }
cd "$OUT"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
export PYTHONPATH="$OUT"
export PROCGEN_ENTITIES_SANITIZER_RUN=1
"$PY" -c "
import procgen_entities, sys
sys.exit(0 if procgen_entities.__file__.startswith('$OUT') else
         'the sanitizer run would import ' + procgen_entities.__file__)"
"$PY" -m pytest -p no:cacheprovider -q -m "not slow" -o addopts="" \
    tests/test_parse_golden.py tests/test_parse_errors.py tests/test_parse_fuzz.py \
    tests/test_tilemap.py tests/test_vec_env.py tests/test_engine.py tests/test_layers.py \
    tests/test_restore.py tests/test_gymnasium.py tests/test_features.py tests/test_concurrency.py \
    tests/test_state_writer.py tests/test_level_text.py tests/test_observation.py tests/test_episodes.py \
    tests/test_grid_boxes.py \
    -k "not never_crash_procgen and not stable_baselines3_trains"
