"""Tools on top of the library: the terminal viewer (dump, render), training (train) and its
plots (plot). Run them as ``python -m procgen_entities.dump|train|plot``."""
