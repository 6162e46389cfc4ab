#!/usr/bin/env bash
# One entry point for a fresh machine. Creates .venv (Python 3.11), installs the package with
# what the task needs, then runs it.
#   bash run.sh demo [GAME]   the viewer on a live procgen level (default: coinrun)
#   bash run.sh test          the whole test suite (plain build), the parser tests against the built
#                             wheel in a fresh venv, then the parser tests under ASan+UBSan
#   bash run.sh train GAME    training with enn-trainer (installs the train extra first)
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
VENV=${VENV:-.venv}

ensure_venv() {
    if [ ! -x "$VENV/bin/python" ]; then
        "$PYTHON" -m venv "$VENV"
        "$VENV/bin/python" -m pip install -q -U pip setuptools wheel
    fi
}

install_package() {  # $1: extras, e.g. "[test]"
    ensure_venv
    # entity-gym declares python<3.11 but works on 3.11: install it without that check (and
    # without its dependencies, which would then ignore Python limits too; pyproject lists them).
    "$VENV/bin/pip" install -q --ignore-requires-python --no-deps "entity-gym==0.1.10"
    "$VENV/bin/pip" install -q -e ".$1"
}

install_train() {
    # ray: RLlib (procgen_entities.rllib, tests/test_rllib.py); its learner uses the CPU torch
    # that train-install.sh installs (ray[rllib] itself pulls no torch and keeps numpy < 2).
    install_package "[test,entity-gym,ray]"
    PYTHON="$VENV/bin/python" bash docs/train-install.sh
}

case "${1:-demo}" in
demo)
    install_package ""
    shift || true
    exec "$VENV/bin/python" -m procgen_entities.dump "${1:-coinrun}" --entities
    ;;
test)
    install_train
    "$VENV/bin/ruff" check . && "$VENV/bin/ruff" format --check procgen_entities tests benchmarks tools
    "$VENV/bin/mypy"
    "$VENV/bin/python" -m pytest -p no:cacheprovider
    bash .ci/wheel.sh "$VENV"
    bash .ci/sanitizers.sh "$VENV"
    ;;
train)
    install_train
    shift
    exec "$VENV/bin/python" -m procgen_entities.train "$@"
    ;;
*)
    echo "usage: bash run.sh demo [GAME] | test | train GAME [overrides]" >&2
    exit 2
    ;;
esac
