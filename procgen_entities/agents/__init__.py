"""Agents as data and code that runs or trains them: the checkpoint format (checkpoint.py: a
folder of data that rebuilds its own env, never a pickle), inference without torch
(numpy_policy.py), enn-trainer's RogueNet checkpoints on the padded observation (enn_policy.py),
the lean PPO learner (lean_ppo.py) and Prioritized Level Replay for sb3_ppo's runs (plr.py).

Libraries only: the programs that use them are procgen_entities/tools/ (sb3_ppo, train,
evaluate, ``tools.checkpoint convert``). Importing this package imports none of its modules, so
``procgen_entities.agents.checkpoint`` needs neither torch nor the viewer.
"""
