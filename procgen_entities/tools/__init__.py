"""The command-line programs, and nothing else (tests/test_layers.py): dump, train, sb3_ppo,
evaluate, plot, results and checkpoint (``convert``). README.md's "Command-line tools" lists every
command of the package with its one ``python -m`` spelling and console script (pyproject.toml
``[project.scripts]``; tests/test_packaging.py holds the three to each other).

What the programs run is library code elsewhere: agents/ (checkpoints, policies, the lean
learner, level replay, evaluation, metrics), viewer/ (render, video) and the core (level_files,
rollout, files). The other modules here are the libraries' old paths, kept: they re-export the
moved names, which are a contract (README.md, "What moved where").
"""
