"""Training recipes: the one home of the optimisation / regularisation choices (data in ``recipes.yaml``).

A recipe is what a paper's *code* did to train a model (learning rates, temperature, clipping, dropouts, init
ranges, dembedding bias, loss precision, tree-induction dropout, decoder child order, epochs, batch size, which
epoch's weights the run keeps, how its dev loss is averaged). The
architecture (structure, functions, objective, k, u) is ``ModelConfig``'s business. ``strae train`` and the
workflow both resolve a run's recipe here; a CLI flag or a config ``overrides:`` entry changes one value and
``ResolvedRecipe.record()`` writes both the values and what was overridden into the run's ``train.json``.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# Every recipe gives each objective a learning rate, and says its loss_precision.
from strae.objectives import LOSS_PRECISIONS
from strae.objectives import NAMES as OBJECTIVE_NAMES
from strae.yamlio import read_yaml

RECIPES_FILE = Path(__file__).with_name("recipes.yaml")
DECODER_CHILD_ORDERS = ("position", "node_id")
OPTIMIZERS = ("adam",)
FINAL_WEIGHTS = ("best_dev_loss", "last")
DEV_LOSS_AVERAGES = ("batches", "sentences")


@dataclass(frozen=True)
class Recipe:
    name: str
    description: str
    lr: dict[str, float]
    temperature: float
    clip_grad_norm: float
    epochs: int
    batch_size: int
    embedding_init_range: float
    gate_init: tuple[float, float]
    embedding_dropout: float
    function_dropout: float
    dembedding_bias: bool
    loss_precision: str
    induction_dropout: bool
    decoder_child_order: str
    optimizer: str
    final_weights: str
    dev_loss_average: str

    # ------------------------------------------------------------------------------------------- validation
    def __post_init__(self) -> None:
        where = f"recipe {self.name!r}"
        missing = [o for o in OBJECTIVE_NAMES if o not in self.lr]
        if missing:
            raise ValueError(f"{where}: lr has no value for objective(s) {', '.join(missing)}")
        for objective, value in self.lr.items():
            if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
                raise ValueError(f"{where}: lr.{objective} must be a positive number, got {value!r}")
        for key in ("embedding_dropout", "function_dropout"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise ValueError(f"{where}: {key} must be in [0, 1), got {getattr(self, key)!r}")
        for key in ("epochs", "batch_size"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{where}: {key} must be a positive integer, got {value!r}")
        # nan compares False both ways: it passed `< 0` and trained (a diverging run, recorded as a failed seed)
        for key in ("temperature", "clip_grad_norm", "embedding_init_range"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{where}: {key} must be a finite number, got {value!r}")
        if self.clip_grad_norm < 0 or self.embedding_init_range <= 0:
            raise ValueError(f"{where}: clip_grad_norm must be >= 0 and embedding_init_range > 0")
        if len(self.gate_init) != 2 or not self.gate_init[0] <= self.gate_init[1]:
            raise ValueError(f"{where}: gate_init must be [low, high] with low <= high, got {list(self.gate_init)!r}")
        for key, allowed in (("loss_precision", LOSS_PRECISIONS), ("decoder_child_order", DECODER_CHILD_ORDERS),
                             ("optimizer", OPTIMIZERS), ("final_weights", FINAL_WEIGHTS),
                             ("dev_loss_average", DEV_LOSS_AVERAGES)):
            if getattr(self, key) not in allowed:
                raise ValueError(f"{where}: {key} {getattr(self, key)!r} is not one of {', '.join(allowed)}")
        for key in ("dembedding_bias", "induction_dropout"):
            if not isinstance(getattr(self, key), bool):
                raise ValueError(f"{where}: {key} must be true or false, got {getattr(self, key)!r}")

    def values(self) -> dict[str, Any]:
        """Every setting (not name/description), JSON-ready."""
        data = dataclasses.asdict(self)
        data.pop("name"), data.pop("description")
        data["gate_init"] = list(self.gate_init)
        return data

    def lr_for(self, objective: str) -> float:
        return float(self.lr[objective])


FIELDS = tuple(f.name for f in dataclasses.fields(Recipe) if f.name not in ("name", "description"))


@functools.lru_cache(maxsize=4)
def _load(path: str) -> dict[str, dict[str, Any]]:
    data = read_yaml(path, ValueError) or {}
    recipes = data.get("recipes")
    if not isinstance(recipes, dict) or not recipes:
        raise ValueError(f"{path}: expected a top-level `recipes:` mapping")
    return recipes


def names(path: Path = RECIPES_FILE) -> list[str]:
    return list(_load(str(path)))


def _raw(name: str, path: Path, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    recipes = _load(str(path))
    if name not in recipes:
        raise ValueError(f"recipe {name!r}: not in {path}; known recipes: {', '.join(recipes)}")
    if name in seen:
        raise ValueError(f"{path}: recipe {name!r} extends itself (chain {' -> '.join(seen + (name,))})")
    entry = dict(recipes[name])
    unknown = sorted(set(entry) - set(FIELDS) - {"extends", "description"})
    if unknown:
        raise ValueError(f"{path}: recipe {name!r} has unknown key(s) {', '.join(unknown)}; known: {', '.join(FIELDS)}")
    parent = entry.pop("extends", None)
    if parent is None:
        return entry
    merged = _raw(parent, path, seen + (name,))
    merged.pop("description", None)
    merged.update(entry)
    return merged


def load(name: str, path: Path = RECIPES_FILE) -> Recipe:
    entry = _raw(name, path)
    missing = [key for key in FIELDS if key not in entry]
    if missing:
        raise ValueError(f"{path}: recipe {name!r} does not define {', '.join(missing)}")
    return _build(name, entry.get("description", ""), entry)


def _build(name: str, description: str, values: dict[str, Any]) -> Recipe:
    kwargs = {key: values[key] for key in FIELDS}
    kwargs["lr"] = {str(k): float(v) for k, v in dict(kwargs["lr"]).items()}
    kwargs["gate_init"] = tuple(float(v) for v in kwargs["gate_init"])
    for key in ("temperature", "clip_grad_norm", "embedding_init_range", "embedding_dropout", "function_dropout"):
        kwargs[key] = float(kwargs[key])
    return Recipe(name=name, description=description, **kwargs)


def parse_value(key: str, text: str) -> Any:
    """A `--set key=value` string -> the typed value (YAML syntax: `lr.ce=1e-4`, `gate_init=[0.6,0.9]`, `true`)."""
    base = key.split(".", 1)[0]
    if base not in FIELDS:
        raise ValueError(f"--set {key}=...: unknown recipe key {base!r}; known: {', '.join(FIELDS)}")
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as error:
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ValueError(f"--set {key}={text}: not a YAML value ({problem}); e.g. lr.ce=1e-4, "
                         "gate_init=[0.6,0.9]") from None
    if base in ("epochs", "batch_size") and isinstance(value, float) and value.is_integer():
        value = int(value)
    return value


def parse_set(item: str, source: str) -> tuple[str, Any, str]:
    """One `--set KEY=VALUE` argument -> an override ``(key, typed value, source)`` for ``resolve``."""
    key, sep, text = item.partition("=")
    if not sep:
        raise ValueError(f"--set {item!r}: expected KEY=VALUE")
    return key.strip(), parse_value(key.strip(), text), source


@dataclass(frozen=True)
class ResolvedRecipe:
    """A named recipe plus the overrides a run applied to it (each recorded with where it came from)."""

    base: Recipe
    recipe: Recipe
    overrides: dict[str, dict[str, Any]]  # key -> {"value", "recipe_value", "source"}

    def record(self) -> dict[str, Any]:
        return {"name": self.base.name, "description": self.base.description, "values": self.recipe.values(),
                "overrides": self.overrides}


def resolve(name: str, overrides: list[tuple[str, Any, str]] | None = None,
            path: Path = RECIPES_FILE) -> ResolvedRecipe:
    """Apply ``(key, value, source)`` overrides in order (later wins). ``lr.<objective>`` sets one learning rate."""
    base = load(name, path)
    original = base.values()
    values = {**original, "lr": dict(original["lr"])}
    applied: dict[str, dict[str, Any]] = {}
    for key, value, source in overrides or []:
        top, _, sub = key.partition(".")
        if top not in FIELDS:
            raise ValueError(f"{source}: unknown recipe key {top!r}; known: {', '.join(FIELDS)}")
        if sub and top != "lr":
            raise ValueError(f"{source}: {key!r}: only lr takes a sub-key (lr.<objective>)")
        if top == "lr" and not sub and not isinstance(value, dict):
            raise ValueError(f"{source}: {key}={value!r}: lr is one learning rate per objective; set one with "
                             f"lr.<objective>=VALUE (objectives: {', '.join(OBJECTIVE_NAMES)}), or pass --lr VALUE")
        if top == "lr" and sub:
            if sub not in OBJECTIVE_NAMES:
                raise ValueError(f"{source}: {key!r}: unknown objective {sub!r}; known: {', '.join(OBJECTIVE_NAMES)}")
            previous = base.lr[sub]
            values["lr"][sub] = value
        else:
            previous = original[top]
            values[top] = value
        if value != previous:
            applied[key] = {"value": value, "recipe_value": previous, "source": source}
        else:
            applied.pop(key, None)
    try:
        recipe = _build(base.name, base.description, values)
    except (TypeError, ValueError) as error:
        raise ValueError(f"recipe {name!r} with overrides {sorted(applied)}: {error}") from error
    return ResolvedRecipe(base=base, recipe=recipe, overrides=applied)


# Keys added after runs were already recorded, with the value those runs had: such a run's model.pt and train.json
# lack the key; it kept its last weights (best-dev-loss selection came with the key) and its dev loss was the
# sentence-weighted mean.
ADDED_KEYS = {"final_weights": "last", "dev_loss_average": "sentences"}


def from_record(record: dict[str, Any]) -> Recipe:
    """The Recipe a run trained with, from its train.json / model.pt ``recipe`` block."""
    return _build(record["name"], record.get("description", ""), {**ADDED_KEYS, **record["values"]})


def legacy(config_dict: dict[str, Any]) -> Recipe:
    """A run written before recipes existed (strae 0.1): its model config carried a few of these values."""
    values = load("strae_0_1").values()
    for key in ("embedding_init_range", "embedding_dropout", "function_dropout", "temperature"):
        if key in config_dict:
            values[key] = config_dict[key]
    if config_dict.get("clip_grad_norm"):
        values["clip_grad_norm"] = config_dict["clip_grad_norm"]
    if "bf16_vocab_projection" in config_dict:
        values["loss_precision"] = "bf16" if config_dict["bf16_vocab_projection"] else "fp32"
    return _build("strae_0_1", "run written before recipes existed (values from its model config)", values)
