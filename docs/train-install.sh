#!/usr/bin/env bash
# Install the training stack (enn-trainer 0.1.16 + CPU torch 2.13.0 + torch-scatter) into a
# Python 3.11 venv that has entity-gym (run.sh installs it with --no-deps first).
#
#   PYTHON=.venv/bin/python bash docs/train-install.sh   # or, with the venv activated: bash docs/train-install.sh
# (run.sh's install_train calls it that way.)
#
# Idempotent: steps whose result is already installed are skipped; safe to re-run.
# Needs: a C++ compiler (g++) for the torch-scatter source build (~5-8 min on 2 cores),
# the CPU wheel torch-2.13.0+cpu reachable by pip (here: find-links /opt/wheels from pip.conf).
# Log: $LOG (default /tmp/train_install.log).
set -euo pipefail

if [ -n "${PYTHON:-}" ]; then PY="$PYTHON"; elif [ -n "${VENV:-}" ]; then PY="$VENV/bin/python"; else PY=python; fi
LOG="${LOG:-/tmp/train_install.log}"
export MAX_JOBS="${MAX_JOBS:-2}"      # torch-scatter build parallelism

# Pins that every pip call below must respect (so no step can swap torch or numpy).
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
cat >"$CONSTRAINTS" <<'EOF'
torch==2.13.0
numpy<2
python-ron==0.2.5
EOF
pip_() { "$PY" -m pip install -c "$CONSTRAINTS" "$@" 2>&1 | { grep -v "is ignored: it is neither" || true; } | tee -a "$LOG"; }
have() { "$PY" - "$@" <<'EOF' >/dev/null 2>&1
import sys
from importlib.metadata import version
name, want = sys.argv[1], sys.argv[2]
sys.exit(0 if version(name).split("+")[0] == want else 1)
EOF
}

echo "=== $(date) train-install.sh with $("$PY" -c 'import sys; print(sys.executable)')" | tee -a "$LOG"

# 1. The project's train extra: torch (CPU build only: pip prefers the local 2.13.0+cpu wheel
#    over PyPI's CUDA 2.13.0), python-ron 0.2.5 (0.2.6+ has no wheel and does not build here) and
#    what enn-trainer needs from PyPI.
#    No constraints file here: with one, pip refuses the already installed entity-gym (it
#    declares python<3.11); the extra and the project pin torch, python-ron and numpy<2 themselves.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$PY" -m pip install -q -e "$ROOT[train,entity-gym]" 2>&1 | { grep -v "is ignored: it is neither" || true; } | tee -a "$LOG"
"$PY" -c 'import torch, sys; sys.exit("torch is a CUDA build; install the +cpu wheel" if torch.version.cuda else 0)'

# 2. torch-scatter: source build against the installed torch (no PyPI wheels for torch 2.13).
#    pip reuses a cached wheel; if that one was built against another torch the import fails,
#    so rebuild without the cache.
if ! "$PY" -c 'import torch_scatter' >/dev/null 2>&1; then
    pip_ --no-build-isolation torch-scatter==2.1.2
    if ! "$PY" -c 'import torch_scatter' >/dev/null 2>&1; then
        pip_ --no-build-isolation --no-cache-dir --force-reinstall --no-deps torch-scatter==2.1.2
    fi
fi

# 3. entity-gym (normally already there: the project needs it; run.sh installs it the same way),
#    enn-trainer, hyperstate and rogue-net declare python<3.11 but work on 3.11. Install the four
#    with --no-deps (with --ignore-requires-python pip would also pick deps that need 3.12, e.g.
#    scipy 1.18), their dependencies come from the train extra (step 1).
if ! "$PY" -c 'import entity_gym' >/dev/null 2>&1; then
    pip_ --ignore-requires-python --no-deps entity-gym==0.1.10
fi
if ! have enn-trainer 0.1.16 || ! have hyperstate 0.4.4 || ! have rogue-net 0.1.9; then
    pip_ --ignore-requires-python --no-deps enn-trainer==0.1.16 hyperstate==0.4.4 rogue-net==0.1.9
fi

# 4. PufferLib 3.0's trainer (procgen_entities.pufferlib, tests/test_pufferlib.py): its wheel
#    pins torch==2.9.0 (a 6.8 GB CUDA stack), so it goes in without its dependencies, beside the
#    CPU torch; then its pure-Python ones (pyro-ppl: pufferl imports pufferlib.sweep).
if ! have pufferlib-core 3.0.23; then
    pip_ --no-deps pufferlib-core==3.0.23
    pip_ rich rich-argparse pyro-ppl psutil nvidia-ml-py
fi

# 5. Verify (pip check knows pufferlib-core's torch pin, which is left unmet on purpose).
broken=$("$PY" -m pip check 2>&1 | grep -v -e "^pufferlib-core .*torch==2.9.0" -e "^No broken" || true)
if [ -n "$broken" ]; then echo "$broken" | tee -a "$LOG"; exit 1; fi
"$PY" - <<'EOF' 2>&1 | tee -a "$LOG"
import numpy, torch, torch_scatter, enn_trainer, rogue_net, hyperstate
assert numpy.__version__.startswith("1."), numpy.__version__
assert torch.__version__.split("+")[0] == "2.13.0" and torch.version.cuda is None, torch.__version__
print("ok: torch", torch.__version__, "torch-scatter", torch_scatter.__version__,
      "numpy", numpy.__version__)
EOF
