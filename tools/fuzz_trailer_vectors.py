"""Mutations aimed at the trailer vectors: the variable-length vectors after the grid
(bossfight's attack_modes, chaser's free_cells and is_space_vec, heist's has_keys, leaper's lane
speeds, plunder's four lane and target vectors, starpilot's spawners: entity records of future
enemies), through parse_states and set_states.

Each mutation takes a real state of a game (a short random rollout of an EntityVectorEnv) and
changes one trailer vector: its count alone (``count``: the bytes no longer add up), or the
vector consistently (count and items together): ``drop`` items, ``duplicate`` them, make it
``empty``, ``grow`` it by up to 1,000 wild items, overwrite an ``element`` (for entity records one
field of one record) with a wild or nearby value, ``shuffle`` it, or ``transplant`` the vector of
another level. Then

1. parse: the C parser and the reference parser both refuse the blob, or give identical batches;
2. set_states: the env refuses it with StateDecodeError, or accepts it;
3. play: the accepted blobs are restored again, in a child process, into envs of both stepping
   engines (headless, and procgen's own through ``direct``) in two copies each, and stepped
   --steps times with random actions (starpilot schedules spawns up to about 520 steps ahead,
   chaser's eggs hatch after up to 50). A signal, a procgen fassert (exit 1) or a hang of the
   child is a crash: the group is replayed blob by blob and each crashing blob is written to --out.

Prints a JSON summary; exits 1 on any parser disagreement or crash. The short version runs in
tests/test_trailer_fuzz.py.

    python tools/fuzz_trailer_vectors.py --mutations 3000 --steps 600 --out /tmp/crashes
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from procgen_entities import GAME_NAMES, MixedBatchError, StateDecodeError, parse_states
from procgen_entities.games import ENTITY_FIELDS, ENTITY_INT_FIELDS, GAMES
from procgen_entities.reference import reference_parse_states

#: The games with trailer vectors, and their vectors' kinds (vi int32, vb bool as int32, vf
#: float32, ve 124-byte entity records).
VECTOR_GAMES = [g for g in GAME_NAMES if any(k.startswith("v") for _, k in GAMES[g].trailer)]
ITEM_BYTES = {"vi": 4, "vb": 4, "vf": 4, "ve": 124}
MUTATIONS = ("count", "drop", "duplicate", "empty", "grow", "element", "shuffle", "transplant")
WILD_INTS = [0, 1, -1, 2, 3, 5, 6, 7, 100, 255, 1000, 2**31 - 1, -(2**31), 2**16, -7]
WILD_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 1e30, -1e30, 1e-40, float("nan"), float("inf"), 2.0**31]
PLAY_TIMEOUT_S = 600.0


# ---- where the vectors are ----


def vector_spans(blob: bytes, game: str) -> Dict[str, Tuple[int, int, str]]:
    """name -> (offset of its count, count, kind) for a valid state: the trailer ends 4 bytes
    before the blob does, and its length follows from the parsed counts."""
    batch = parse_states([blob], game=game)
    items = GAMES[game].trailer
    length = sum(
        4 + ITEM_BYTES[kind] * int(batch.vector_counts[name][0]) if kind.startswith("v") else 4
        for name, kind in items
    )
    at = len(blob) - 4 - length
    spans = {}
    for name, kind in items:
        if kind.startswith("v"):
            count = struct.unpack_from("<i", blob, at)[0]
            spans[name] = (at, count, kind)
            at += 4 + ITEM_BYTES[kind] * count
        else:
            at += 4
    assert at == len(blob) - 4, "the trailer walk did not end where the state does"
    return spans


def _items(blob: bytes, span: Tuple[int, int, str]) -> List[bytes]:
    at, count, kind = span
    size = ITEM_BYTES[kind]
    return [blob[at + 4 + k * size : at + 4 + (k + 1) * size] for k in range(count)]


def _with_items(blob: bytes, span: Tuple[int, int, str], items: Sequence[bytes]) -> bytes:
    at, count, kind = span
    end = at + 4 + ITEM_BYTES[kind] * count
    return blob[:at] + struct.pack("<i", len(items)) + b"".join(items) + blob[end:]


# ---- mutations ----


def _wild_int(rng: np.random.Generator, old: int) -> int:
    if rng.random() < 0.5:
        return WILD_INTS[int(rng.integers(len(WILD_INTS)))]
    return old + int(rng.integers(-3, 4))


def _wild_float(rng: np.random.Generator, old: float) -> float:
    if rng.random() < 0.5:
        return WILD_FLOATS[int(rng.integers(len(WILD_FLOATS)))]
    return old + float(rng.normal(0, 1 + abs(old)))


def _wild_item(rng: np.random.Generator, kind: str, like: bytes) -> bytes:
    """``like`` with one value changed (one field of an entity record)."""
    item = bytearray(like)
    if kind == "ve":
        k = int(rng.integers(len(ENTITY_FIELDS)))
        is_int = ENTITY_FIELDS[k] in ENTITY_INT_FIELDS
    else:
        k, is_int = 0, kind != "vf"
    if is_int:
        old = struct.unpack_from("<i", item, 4 * k)[0]
        value = _wild_int(rng, old)
        struct.pack_into("<I", item, 4 * k, value & 0xFFFFFFFF)
    else:
        old_f = struct.unpack_from("<f", item, 4 * k)[0]
        with np.errstate(over="ignore"):
            struct.pack_into("<f", item, 4 * k, float(np.float32(_wild_float(rng, old_f))))
    return bytes(item)


def mutate(
    rng: np.random.Generator, game: str, blob: bytes, others: Sequence[bytes]
) -> Tuple[str, bytes]:
    """One mutation of one trailer vector of ``blob``; returns (description, mutated blob)."""
    spans = vector_spans(blob, game)
    name = str(rng.choice(sorted(spans)))
    span = spans[name]
    at, count, kind = span
    items = _items(blob, span)
    what = MUTATIONS[int(rng.integers(len(MUTATIONS)))]
    template = items[0] if items else bytes(ITEM_BYTES[kind])
    if what == "count":
        value = _wild_int(rng, count)
        return f"{name}.count={value}", blob[:at] + struct.pack("<I", value & 0xFFFFFFFF) + blob[
            at + 4 :
        ]
    if what == "drop" and items:
        keep = sorted(rng.choice(len(items), int(rng.integers(0, len(items))), replace=False))
        items = [items[k] for k in keep]
    elif what == "duplicate" and items:
        extra = [items[int(rng.integers(len(items)))] for _ in range(int(rng.integers(1, 4)))]
        items = items + extra if rng.random() < 0.5 else extra + items
    elif what == "empty":
        items = []
    elif what == "grow":
        size = int(rng.choice([1, 2, 10, 100, 1000]))
        items = items + [_wild_item(rng, kind, template) for _ in range(size)]
    elif what == "element" and items:
        for _ in range(int(rng.integers(1, 4))):
            k = int(rng.integers(len(items)))
            items[k] = _wild_item(rng, kind, items[k])
    elif what == "shuffle" and len(items) > 1:
        items = [items[k] for k in rng.permutation(len(items))]
    elif what == "transplant":
        other = others[int(rng.integers(len(others)))]
        items = _items(other, vector_spans(other, game)[name])
    else:
        what = "unchanged"
    return f"{name}.{what}[{count}->{len(items)}]", _with_items(blob, span, items)


# ---- the checks ----


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def parse_outcome(blob: bytes, game: str) -> str:
    """ "accepted", "refused" or "disagree: ..." (the C parser against the reference)."""
    outcomes = []
    for parse in (parse_states, reference_parse_states):
        try:
            outcomes.append(parse([blob], game=game))
        except (StateDecodeError, MixedBatchError) as exc:
            outcomes.append(type(exc))
    c, ref = outcomes
    if isinstance(c, type) or isinstance(ref, type):
        return "refused" if c is ref else f"disagree: C {c!r}, reference {ref!r}"
    fields = [f.name for f in dataclasses.fields(c)]
    differ = [f for f in fields if not _same(getattr(c, f), getattr(ref, f))]
    return f"disagree: {differ}" if differ else "accepted"


def real_states(game: str, seed: int, count: int) -> List[bytes]:
    """``count`` states from a random rollout of 4 envs (every 7th step, episode ends included)."""
    from procgen_entities.gymnasium import EntityVectorEnv

    rng = np.random.default_rng(seed)
    out: List[bytes] = []
    with EntityVectorEnv(game, 4, seed=seed, num_threads=1, autoreset_mode="SameStep") as env:
        env.reset()
        while len(out) < count:
            for _ in range(7):
                env.step(rng.integers(0, 15, 4))
            out.extend(env.get_states())
    return out[:count]


def play(game: str, blobs: Sequence[bytes], steps: int, seed: int) -> Tuple[int, str]:
    """Restore ``blobs`` and step them in a child process: (return code, stderr's tail); -9
    for a hang."""
    with tempfile.NamedTemporaryFile(suffix=".states", delete=False) as f:
        for blob in blobs:
            f.write(struct.pack("<i", len(blob)) + blob)
    cmd = [sys.executable, __file__, "--play", f.name, "--games", game]
    cmd += ["--steps", str(steps), "--seed", str(seed)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PLAY_TIMEOUT_S)
        return proc.returncode, proc.stderr[-400:]
    except subprocess.TimeoutExpired:
        return -9, "hung"
    finally:
        Path(f.name).unlink()


def _play_child(path: str, game: str, steps: int, seed: int) -> None:
    """The child of ``play``: both stepping engines, two copies of every blob each."""
    import warnings

    from procgen_entities.gymnasium import EntityVectorEnv

    warnings.simplefilter("ignore")
    data = Path(path).read_bytes()
    blobs, at = [], 0
    while at < len(data):
        (size,) = struct.unpack_from("<i", data, at)
        blobs.append(data[at + 4 : at + 4 + size])
        at += 4 + size
    copies = blobs * 2
    rng = np.random.default_rng(seed)
    for engine in ("headless", "direct"):
        with EntityVectorEnv(
            game, len(copies), seed=seed, num_threads=1, engine=engine, autoreset_mode="SameStep"
        ) as env:
            env.set_states(copies)
            for _ in range(steps):
                env.step(rng.integers(0, 15, len(copies)))
            env.render()


def fuzz_game(game: str, mutations: int, steps: int, seed: int, out: Path) -> Dict[str, Any]:
    from procgen_entities.gymnasium import EntityVectorEnv

    rng = np.random.default_rng(seed)
    states = real_states(game, seed, 24)
    summary: Dict[str, Any] = {"mutations": mutations}
    parse_counts: Counter = Counter()
    refused_at: Counter = Counter()
    accepted: List[Tuple[str, bytes]] = []
    disagreements: List[str] = []
    with EntityVectorEnv(game, 1, seed=seed, num_threads=1, autoreset_mode="SameStep") as env:
        env.reset()
        for _ in range(mutations):
            what, blob = mutate(rng, game, states[int(rng.integers(len(states)))], states)
            parsed = parse_outcome(blob, game)
            parse_counts[parsed.split(":")[0]] += 1
            if parsed.startswith("disagree"):
                disagreements.append(f"{what}: {parsed}")
                continue
            try:
                env.set_states([blob])
            except StateDecodeError as exc:
                refused_at[exc.field] += 1
                continue
            accepted.append((what, blob))
    crashes = _play_all(game, accepted, steps, seed, out)
    kinds = Counter(what.split("[")[0] for what, _ in accepted)
    summary.update(
        parse=dict(parse_counts), set_states_refused=dict(refused_at.most_common()),
        set_states_accepted=len(accepted), accepted_kinds=dict(kinds.most_common()),
        disagreements=disagreements, crashes=crashes,
    )  # fmt: skip
    return summary


def _play_all(
    game: str, accepted: List[Tuple[str, bytes]], steps: int, seed: int, out: Path
) -> List[Dict[str, Any]]:
    """Play the accepted blobs in groups of 16; a failing group blob by blob."""
    crashes = []
    for start in range(0, len(accepted), 16):
        group = accepted[start : start + 16]
        code, _ = play(game, [b for _, b in group], steps, seed)
        if code == 0:
            continue
        for what, blob in group:
            code, tail = play(game, [blob], steps, seed)
            if code != 0:
                out.mkdir(parents=True, exist_ok=True)
                path = out / f"{game}-{len(crashes)}.state"
                path.write_bytes(blob)
                crashes.append({"mutation": what, "returncode": code, "file": str(path),
                                "stderr": tail.strip().splitlines()[-1:]})  # fmt: skip
    return crashes


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", nargs="+", default=VECTOR_GAMES, choices=VECTOR_GAMES)
    parser.add_argument("--mutations", type=int, default=500, help="per game")
    parser.add_argument("--steps", type=int, default=600, help="steps after each restore")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "trailer-fuzz")
    parser.add_argument("--play", help=argparse.SUPPRESS)  # the child of play()
    args = parser.parse_args(list(argv) or None)
    if args.play:
        _play_child(args.play, args.games[0], args.steps, args.seed)
        return 0
    import warnings

    warnings.simplefilter("ignore")  # engine notices; the summary is the output
    start = time.monotonic()
    report = {g: fuzz_game(g, args.mutations, args.steps, args.seed, args.out) for g in args.games}
    failed = any(r["disagreements"] or r["crashes"] for r in report.values())
    print(json.dumps({"games": report, "seconds": round(time.monotonic() - start, 1),
                      "failed": failed}, indent=1))  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
