#!/usr/bin/env bash
# One entry point for a fresh machine. Creates .venv (Python 3.11), installs the package with
# what the task needs, then runs it.
#   bash run.sh demo [GAME]   the committed agent of GAME (coinrun, ninja, climber; default coinrun)
#                             playing a level in the viewer, core install only (no torch); other
#                             games: the viewer on a live level with random actions
#   bash run.sh test          the whole test suite (plain build), the parser tests against the built
#                             wheel in a fresh venv, then the parser tests under ASan+UBSan
#   bash run.sh train GAME    training with enn-trainer (installs the train extra first)
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
VENV=${VENV:-.venv}

LOG=${LOG:-$VENV/install.log}

quietly() {  # run an install step with its output in $LOG; on failure show the log's end
    mkdir -p "$(dirname "$LOG")"
    if ! "$@" >>"$LOG" 2>&1; then
        echo "run.sh: failed: $* (last lines of $LOG:)" >&2
        tail -n 20 "$LOG" >&2
        exit 1
    fi
}

ensure_venv() {
    if [ ! -x "$VENV/bin/python" ]; then
        quietly "$PYTHON" -m venv "$VENV"
        quietly "$VENV/bin/python" -m pip install -U pip setuptools wheel
    fi
}

install_package() {  # $1: extras, e.g. "[test]"
    local start=$SECONDS
    ensure_venv
    # entity-gym declares python<3.11 but works on 3.11: install it without that check (and
    # without its dependencies, which would then ignore Python limits too; pyproject lists them).
    quietly "$VENV/bin/pip" install --ignore-requires-python --no-deps "entity-gym==0.1.10"
    quietly "$VENV/bin/pip" install -e ".$1"
    echo "run.sh: procgen-entities${1:- (core)} installed in $VENV in $((SECONDS - start)) s (log: $LOG)"
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
    GAME=${1:-coinrun}
    # an enn-trainer checkpoint (RogueNet, checkpoints/GAME/enn) needs the train extra's torch
    if [ -d "checkpoints/$GAME/enn" ] && ! "$VENV/bin/python" -c "import enn_trainer" 2>/dev/null; then
        echo "run.sh: checkpoints/$GAME is enn-trainer's RogueNet, which needs the train extra" \
            "(PYTHON=$VENV/bin/python bash docs/train-install.sh); showing the entities" >&2
    elif [ -f "checkpoints/$GAME/env.json" ]; then
        exec "$VENV/bin/python" -m procgen_entities.dump "$GAME" --policy "checkpoints/$GAME" \
            --watch --delay 0.08 --seed "${SEED:-$RANDOM}"
    fi
    exec "$VENV/bin/python" -m procgen_entities.dump "$GAME" --entities
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
