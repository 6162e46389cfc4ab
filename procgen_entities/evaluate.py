"""``python -m procgen_entities.evaluate``: see procgen_entities/tools/evaluate.py."""

from procgen_entities.tools.evaluate import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
