"""Model architecture shared by Self-StrAE and Banyan (one engine, switches).

Only the architecture lives here: structure, functions, objective, channels (k x u) and the vocabulary. How a
model is *trained* (learning rates, temperature, clipping, dropouts, init ranges, dembedding bias, loss precision,
tree-induction dropout, decoder child order, epochs) is its recipe: ``strae/recipes.yaml`` (``strae.recipes``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

# The registry's list of objectives (one module each).
from strae.objectives import NAMES as OBJECTIVES

MODELS = ("selfstrae", "banyan")
STRUCTURES = ("sentential", "entangled")
FUNCTIONS = ("linear", "diagonal")

# Each paper's architecture. Self-StrAE: SemEval-2024 §3.1 (sentential, linear, CECO, k = u = 16 for E = 256);
# Banyan: Banyan §3 + App. A (entangled, diagonal, CE, k = 128, u = 2).
PRESETS: dict[str, dict] = {
    "selfstrae": dict(structure="sentential", functions="linear", objective="ceco", k=16, u=16),
    "banyan": dict(structure="entangled", functions="diagonal", objective="ce", k=128, u=2),
}

# Keys that model configs written before recipes existed (strae 0.1) carried; they now belong to the recipe
# (``strae.recipes.legacy`` reads them) and are dropped when such a config is loaded.
LEGACY_RECIPE_KEYS = ("embedding_init_range", "embedding_dropout", "function_dropout", "temperature", "lr",
                      "clip_grad_norm", "bf16_vocab_projection")


@dataclass
class ModelConfig:
    model: str = "banyan"
    structure: str = "entangled"
    functions: str = "diagonal"
    objective: str = "ce"
    k: int = 128
    u: int = 2
    vocab_size: int = 25000

    def __post_init__(self) -> None:
        self.validate()

    @property
    def embedding_size(self) -> int:
        return self.k * self.u

    def validate(self) -> None:
        for key, allowed in (("model", MODELS), ("structure", STRUCTURES), ("functions", FUNCTIONS),
                             ("objective", OBJECTIVES)):
            value = getattr(self, key)
            if value not in allowed:
                raise ValueError(f"model config key {key!r}: {value!r} is not one of {', '.join(allowed)}")
        for key in ("k", "u", "vocab_size"):
            value = getattr(self, key)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"model config key {key!r}: must be a positive integer, got {value!r}")

    def setting_name(self) -> str:
        return f"{self.objective}_{self.functions}_{self.structure}_k{self.k}_u{self.u}"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        data = {key: value for key, value in data.items() if key not in LEGACY_RECIPE_KEYS}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"model config: unknown key(s) {', '.join(unknown)}; "
                             f"known keys: {', '.join(sorted(known))}")
        return cls(**data)

    @classmethod
    def preset(cls, model: str, **overrides) -> ModelConfig:
        """The paper's architecture for ``model``; ``overrides`` with value None are ignored (argparse defaults)."""
        if model not in PRESETS:
            raise ValueError(f"model {model!r}: expected one of {', '.join(PRESETS)}")
        values = dict(model=model, **PRESETS[model])
        values.update({key: value for key, value in overrides.items() if value is not None})
        return cls.from_dict(values)
