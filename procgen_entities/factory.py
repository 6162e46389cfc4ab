"""``procgen_entities.factory.env_factory``: the documented import of the enn-trainer factory."""

from procgen_entities.entity_gym.factory import env_factory

__all__ = ["env_factory"]
