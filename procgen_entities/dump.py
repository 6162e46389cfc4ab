"""``python -m procgen_entities.dump``: the stable entry point of procgen_entities.tools.dump."""

from procgen_entities.tools.dump import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
