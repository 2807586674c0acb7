"""Skull King (Grandpa Beck's Games, current edition): the game batched on the device, its rule bots.

Modules from the bottom up: ``cards`` (ids, tables, action layout), ``params`` (ruleset), ``rules``
(lead suit, legality, trick resolution, scoring), ``state`` (the batched state and the deal), ``game`` and
``abilities`` (the stages of a step), ``observation``, ``env`` (SkullKing-v0), ``bots``.
"""
