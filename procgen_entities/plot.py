"""``python -m procgen_entities.plot``: the stable entry point of procgen_entities.tools.plot."""

from procgen_entities.tools.plot import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
