"""Tools on top of the library. Each runs as one ``python -m`` module and as one console script
(pyproject.toml ``[project.scripts]``, ``procgen-entities-<name>``; tests/test_packaging.py):

- ``procgen_entities.dump`` (``-dump``): the terminal viewer (tools/dump.py, rollout.py, render.py,
  video.py; its glyphs are the core's, procgen_entities/glyphs.py)
- ``procgen_entities.train`` (``-train``): enn-trainer PPO (tools/train.py)
- ``procgen_entities.tools.sb3_ppo`` (``-sb3-ppo``): Stable-Baselines3 PPO into checkpoints
- ``procgen_entities.evaluate`` (``-evaluate``): a checkpoint next to the baselines
- ``procgen_entities.plot`` (``-plot``): learning curves from metrics.jsonl files
- ``procgen_entities.tools.results`` (``-results``): trained runs as one Markdown table
- ``procgen_entities.tools.checkpoint`` (``-checkpoint``): ``convert`` old pickled folders
- ``procgen_entities.rllib`` (``-rllib``): RLlib PPO on a Ray cluster
- ``procgen_entities.engine.dwarf`` (``-dwarf``): a procgen build's class layout

Checkpoints are data (checkpoint.py; numpy_policy.py runs them without torch, enn_policy.py
loads enn-trainer's). ``procgen_entities.dump|train|evaluate|plot`` are the stable entry points
of the modules here of the same names.
"""
