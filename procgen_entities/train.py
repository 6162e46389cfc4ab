"""``python -m procgen_entities.train``: the stable entry point of procgen_entities.tools.train."""

from procgen_entities.tools.train import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
