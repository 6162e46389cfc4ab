#!/usr/bin/env bash
# Build the extensions with AddressSanitizer + UndefinedBehaviorSanitizer into a separate
# folder and run the parser, fuzz and collector tests against that build.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
VENV_ABS=$(cd "$VENV" && pwd)
OUT=$(mktemp -d)
cp -r procgen_entities csrc setup.py pyproject.toml README.md "$OUT"/
rm -f "$OUT"/procgen_entities/*.so
(cd "$OUT" && PROCGEN_ENTITIES_SANITIZE=1 "$VENV_ABS"/bin/python setup.py -q build_ext --inplace) \
    2>&1 | grep -v -E "^(warning|copying|running)" || true
ls "$OUT"/procgen_entities/*.so >/dev/null
ASAN_LIB=$(gcc -print-file-name=libasan.so)
UBSAN_LIB=$(gcc -print-file-name=libubsan.so)
cp -r tests "$OUT"/
cd "$OUT"
PYTHONPATH="$OUT" "$VENV_ABS"/bin/python -c "import procgen_entities, sys; f = procgen_entities.__file__; sys.exit(0 if f.startswith(\"$OUT\") else f\"sanitizer run imports {f}, not the sanitizer build\")"
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
LD_PRELOAD="$ASAN_LIB $UBSAN_LIB" \
PYTHONPATH="$OUT" \
    "$VENV_ABS"/bin/python -m pytest -p no:cacheprovider -q -m "not slow" \
    tests/test_parse_golden.py tests/test_parse_errors.py tests/test_parse_fuzz.py \
    tests/test_vec_env.py -k "not rss"
