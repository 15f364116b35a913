"""The training objectives, one module each, selected by name (``ModelConfig.objective``): the one list of them.

The engine (``StraeModel.loss``) runs a first up-and-down pass over the batch and hands it to the objective
(``base.Passes``); the objective combines its loss terms (``terms``: vocabulary cross entropy, symmetric
contrastive) into the loss and its metrics, running more passes if it needs them (StrCSE), and declares the
matrix products those terms cost (``gemm_shapes``; the throughput benchmark reads them).

Adding an objective: a module ``strae/objectives/<name>.py`` with a ``base.Objective`` subclass, its name in
``NAMES`` and its class in ``classes()`` below. Each recipe then needs a learning rate for it
(``strae/recipes.yaml``), and the workflow schema's ``objective`` enum lists it (tests check both against
``NAMES``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from strae.objectives.base import Objective

# Importable without torch: the config, recipe and workflow code read them.
NAMES = ("ce", "contrastive", "ceco", "strcse")
# a recipe's loss_precision: the dtype / tensor-core mode of the terms' products (base.Objective)
LOSS_PRECISIONS = ("fp32", "bf16", "tf32")


def classes() -> dict[str, type[Objective]]:
    """Name -> objective class. Imported on use, so ``NAMES`` costs no torch import; static ``from`` imports, so
    ``strae export`` can follow them to copy the engine."""
    from strae.objectives.ce import CrossEntropy
    from strae.objectives.ceco import CrossEntropyContrastive
    from strae.objectives.contrastive import Contrastive
    from strae.objectives.strcse import StrCSE

    return {cls.name: cls for cls in (CrossEntropy, Contrastive, CrossEntropyContrastive, StrCSE)}


def create(name: str, *, precision: str, temperature: float) -> Objective:
    """The objective ``name`` for a run whose recipe says ``loss_precision`` = ``precision`` and ``temperature``."""
    if name not in NAMES:
        raise ValueError(f"objective {name!r}: not one of {', '.join(NAMES)}")
    return classes()[name](precision=precision, temperature=temperature)
