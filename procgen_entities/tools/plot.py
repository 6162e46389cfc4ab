"""Learning curves from training metrics.

    python -m procgen_entities.plot METRICS.jsonl ... -o OUT.png [--table]


Each metrics file (written by procgen_entities.train) becomes one curve: mean episodic return
over a sliding window of finished episodes against env steps, with the game's R_min and R_max
from the procgen paper drawn as dashed lines and the published 25M-step anchors
(``games.Game.anchors``: pixel PPO, the procgen authors' PPO, the 2022 entity agent) as markers
at 25M, one panel per game (``--columns N``: N panels a row). ``--table`` prints a markdown
table of the final numbers (mean return of the last 10% of episodes, normalised score,
level_complete rate, steps/s).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, List, Optional, Sequence

# Reading the metrics is agents/metrics.py's; this path re-exports its names (they were defined
# here, and are a contract: tests/test_layers.py).
from procgen_entities.agents.metrics import (
    MACHINE_OVERRIDES,
    Run,
    final_stats,
    load_run,
    smooth,
    summary_table,
)

__all__ = [
    "MACHINE_OVERRIDES", "Run", "final_stats", "load_run", "main", "plot_runs", "smooth",
    "summary_table",
]  # fmt: skip


#: How each anchor is drawn at 25M steps (games.ANCHOR_SOURCES keys).
_ANCHOR_STYLE = {"pixel_ppo": ("*", "tab:red", "pixel PPO 25M"),
                 "procgen_ppo": ("P", "tab:orange", "procgen authors' PPO 25M"),
                 "roguenet_2022": ("D", "tab:purple", "RogueNet 2022, 25M")}  # fmt: skip


def _anchors(ax: Any, game: str) -> None:
    from procgen_entities.games import GAMES

    known = GAMES.get(game)
    for key, value in (known.anchors if known else {}).items():
        marker, colour, label = _ANCHOR_STYLE.get(key, ("o", "grey", key))
        ax.plot([25e6], [value], marker=marker, c=colour, ls="none", ms=9, label=label)


def plot_runs(runs: Sequence[Run], out: Path, window: int = 500, columns: int = 0) -> None:
    """One panel per game, in rows of ``columns`` panels (0: all in one row)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    games = list(dict.fromkeys(str(r.meta.get("game")) for r in runs))
    across = min(columns, len(games)) if columns > 0 else len(games)
    down = -(-len(games) // across)
    # each row's legend hangs below its panels, so a row is taller than the panel alone
    fig, axes = plt.subplots(down, across, figsize=(6.5 * across, 6.2 * down - 2.0),
                             squeeze=False)  # fmt: skip
    for ax in axes.flat[len(games) :]:
        ax.set_visible(False)
    for ax, game in zip(axes.flat, games):
        game_runs = [r for r in runs if r.meta.get("game") == game]
        for run in game_runs:
            ax.plot(run.steps, smooth(run.returns, window), label=run.label, lw=1.5)
        meta = game_runs[0].meta
        ax.axhline(meta.get("r_min", 0.0), ls="--", c="grey", lw=1, label="R_min")
        ax.axhline(meta.get("r_max", 10.0), ls="--", c="black", lw=1, label="R_max")
        _anchors(ax, game)
        ax.set_title(f"{game} (easy)")
        ax.set_xlabel("env steps")
        ax.set_ylabel(f"episodic return (mean of last {window} episodes)")
        # under the panel: long labels covered the curves (savefig grows the canvas for it)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.35), frameon=False)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")  # the canvas grows to hold the legends
    plt.close(fig)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m procgen_entities.plot", description=__doc__.split("\n")[0]
    )
    parser.add_argument("metrics", nargs="+", type=Path, help="metrics.jsonl files (or .jsonl.gz)")
    parser.add_argument("-o", "--out", type=Path, default=Path("learning-curves.png"))
    parser.add_argument("--window", type=int, default=500, help="episodes to average over")
    parser.add_argument("--table", action="store_true", help="also print a markdown table")
    parser.add_argument("--columns", type=int, default=0,
                        help="panels per row (default: every game in one row)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.window < 1 or args.columns < 0:
        parser.error("--window must be at least 1 and --columns at least 0")
    try:
        runs = [load_run(p) for p in args.metrics]
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    plot_runs(runs, args.out, args.window, args.columns)
    print(f"wrote {args.out}")
    if args.table:
        print(summary_table(runs))
    return 0
