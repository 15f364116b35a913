"""Model configuration shared by Self-StrAE and Banyan (one engine, switches)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

MODELS = ("selfstrae", "banyan")
STRUCTURES = ("sentential", "entangled")
FUNCTIONS = ("linear", "diagonal")
OBJECTIVES = ("ce", "contrastive", "ceco", "strcse")

# The papers' defaults. Self-StrAE: SemEval-2024 paper §3.1 (CECO, tau 1.2, grad clip 1.0, k=u=16 for E=256);
# Banyan: Banyan paper §3 + appendix A (entangled, diagonal, CE, tau 0.2, k=128 u=2).
PRESETS: dict[str, dict] = {
    "selfstrae": dict(structure="sentential", functions="linear", objective="ceco", k=16, u=16, temperature=1.2,
                      lr=1e-3, clip_grad_norm=1.0),
    "banyan": dict(structure="entangled", functions="diagonal", objective="ce", k=128, u=2, temperature=0.2,
                   lr=1e-3, clip_grad_norm=None),
}


@dataclass
class ModelConfig:
    model: str = "banyan"
    structure: str = "entangled"
    functions: str = "diagonal"
    objective: str = "ce"
    k: int = 128
    u: int = 2
    vocab_size: int = 25000
    embedding_init_range: float = 0.1
    embedding_dropout: float = 0.2
    function_dropout: float = 0.1
    # Contrastive logits are cosine * exp(temperature) (the reference code's convention).
    temperature: float = 0.2
    # Optimisation defaults travel with the config so a run directory records them; the trainer may override.
    lr: float = 1e-3
    clip_grad_norm: float | None = None
    # bf16 autocast for the vocabulary projection when the device supports it (fp32 master weights).
    bf16_vocab_projection: bool = True

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
        for key in ("embedding_dropout", "function_dropout"):
            value = getattr(self, key)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"model config key {key!r}: must be in [0, 1), got {value!r}")

    def setting_name(self) -> str:
        return f"{self.objective}_{self.functions}_{self.structure}_k{self.k}_u{self.u}"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ModelConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"model config: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(known))}")
        return cls(**data)

    @classmethod
    def preset(cls, model: str, **overrides) -> "ModelConfig":
        """The papers' defaults for ``model``; ``overrides`` with value None are ignored (argparse defaults)."""
        if model not in PRESETS:
            raise ValueError(f"model {model!r}: expected one of {', '.join(PRESETS)}")
        values = dict(model=model, **PRESETS[model])
        given = {key: value for key, value in overrides.items() if value is not None}
        if given.get("objective") == "contrastive" and "lr" not in given:
            values["lr"] = 1e-4  # both papers: 1e-4 for the contrastive objective, 1e-3 otherwise
        values.update(given)
        return cls.from_dict(values)
