#!/usr/bin/env bash
# Packaging check: build the sdist and the wheel (python -m build), install the wheel into a fresh
# venv (no editable install, no source tree on the path) and run the parser tests against it.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
PY=$(cd "$VENV" && pwd)/bin/python
OUT=$(mktemp -d)
"$PY" -m build --outdir "$OUT/dist" . >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
ls "$OUT"/dist/*.tar.gz "$OUT"/dist/*.whl
"$PY" -m venv "$OUT/venv"
"$OUT/venv/bin/pip" install -q "$OUT"/dist/*.whl "pytest>=7" "hypothesis>=6" 2>&1 \
    | { grep -v "is ignored: it is neither" || true; }
cp -r tests "$OUT/tests"
cd "$OUT"
"$OUT/venv/bin/python" -c "
import procgen_entities, sys
where = procgen_entities.__file__
sys.exit(0 if where.startswith('$OUT/venv/') else 'the wheel test would import ' + where)"
"$OUT/venv/bin/python" -m pytest -p no:cacheprovider -q -o addopts="" \
    tests/test_parse_golden.py tests/test_parse_errors.py tests/test_parse_fuzz.py \
    tests/test_layers.py -k "not validator and not failed_collect" -W ignore::pytest.PytestUnknownMarkWarning
