"""The training objectives, one module each, selected by name (``ModelConfig.objective``): the one list of them.

The engine (``StraeModel.loss``) runs a first up-and-down pass over the batch and hands it to the objective
(``base.Passes``); the objective combines its loss terms (``terms``: vocabulary cross entropy, symmetric
contrastive) into the loss and its metrics, running more passes if it needs them (StrCSE), and declares the
matrix products those terms cost (``gemm_shapes``; the throughput benchmark reads them).

Adding an objective: a module ``strae/objectives/<name>.py`` whose ``OBJECTIVE`` is a ``base.Objective``
subclass, and its name in ``NAMES``. Each recipe then needs a learning rate for it (``strae/recipes.yaml``), and
the workflow schema's ``objective`` enum lists it (tests check both against ``NAMES``).

This module imports nothing heavy (no torch): the config, recipe and workflow code read ``NAMES`` from it.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from strae.objectives.base import Objective

NAMES = ("ce", "contrastive", "ceco", "strcse")


def create(name: str, *, precision: str, temperature: float) -> Objective:
    """The objective ``name`` for a run whose recipe says ``loss_precision`` = ``precision`` and ``temperature``."""
    if name not in NAMES:
        raise ValueError(f"objective {name!r}: not one of {', '.join(NAMES)}")
    objective = importlib.import_module(f"{__name__}.{name}").OBJECTIVE
    return objective(precision=precision, temperature=temperature)
