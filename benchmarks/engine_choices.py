"""Which engine every model setting the config trains gets on a device: a line per setting, then ONE summary line.

    python benchmarks/engine_choices.py [--device auto] [--config config/config.yaml] [--only SETTING ...]

For each (model, setting) of the config's experiments (disabled ones too), built with its model's recipe and the
run's recipe overrides as `strae train` would, the engines `strae train` would use on the device: the induction
(``induction_kernel`` auto: the fused Triton kernel on CUDA), the passes (``propagation`` auto: handwritten where the
induction runs Triton) and their levels (the Triton level kernels, when they pass their first-use check). Each
Triton engine checks itself on first use and falls back to torch when it fails — correct, but on a GPU ~2-25x
slower — so a setting that falls back here would cost its runs that much device time. On a CPU the Triton engines
run only under Triton's interpreter (``TRITON_INTERPRET=1``; there the induction is requested as ``triton``): the
kernels' logic and the checks' arithmetic, not their compiled numerics (without it a CPU gets torch everywhere, as a CPU
run does). Exit status 1 when a setting falls back.

2026-11-27 (interpreter): Self-StrAE CECO k256 u1, a SemEval Table 2 grid point, failed the levels' check (a bound
relative to a cancelling gradient sum), since fixed (models/propagation.py ``LEVELS_CHECK_ROUNDING_FACTOR``).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from strae import plan
from strae.data.registry import load_config
from strae.models.config import ModelConfig
from strae.models.fused import interpreting
from strae.models.model import StraeModel
from strae.runtime import describe_device, resolve_device


def settings(config: dict, only: list[str]) -> list[plan.Run]:
    """The first run of each (model, setting), in plan order."""
    chosen: dict[tuple[str, str], plan.Run] = {}
    for run in plan.model_runs(config, include_disabled=True):
        if not (only and run.setting not in only):
            chosen.setdefault((run.model, run.setting), run)
    return list(chosen.values())


def engines(config: dict, run: plan.Run, device: torch.device, vocab_size: int) -> dict[str, str]:
    architecture = ModelConfig(model=run.model, vocab_size=vocab_size, **plan.parse_setting(run.setting))
    recipe = plan.run_recipe(config, run)
    requested = "triton" if device.type != "cuda" and interpreting() else "auto"
    torch.manual_seed(0)
    model = StraeModel(architecture, recipe, induction_kernel=requested, propagation="auto").to(device)
    induction = model.kernel_choice(device)
    mode = model.propagation_mode(device)
    levels = model.levels_choice(device)
    return {"recipe": recipe.name, "induction": induction.used, "propagation": mode, "levels": levels.used,
            "reason": levels.reason if mode == "handwritten" else induction.reason}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--config", type=Path, default=Path("config/config.yaml"))
    parser.add_argument("--only", action="append", default=[], metavar="SETTING", help="just this setting (repeatable)")
    parser.add_argument("--vocab-size", type=int, default=25000, help="the models' vocabulary (a real run's: 25000)")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    config = load_config(args.config)
    todo = settings(config, args.only)
    if not todo:
        parser.error(f"no model setting of {args.config} matches {args.only}")
    started = time.perf_counter()
    triton_expected = device.type == "cuda" or interpreting()  # elsewhere torch is the choice, not a fallback
    fallbacks = []
    for run in todo:
        chosen = engines(config, run, device, args.vocab_size)
        fast = (chosen["induction"], chosen["propagation"], chosen["levels"]) == ("triton", "handwritten", "triton")
        if triton_expected and not fast:
            fallbacks.append(f"{run.model}/{run.setting}")
        print(f"model={run.model} setting={run.setting} recipe={chosen['recipe']} induction={chosen['induction']} "
              f"propagation={chosen['propagation']} levels={chosen['levels']} fast={'yes' if fast else 'no'} "
              f"reason={chosen['reason']!r}", flush=True)
    print(f"settings={len(todo)} fast={len(todo) - len(fallbacks)} fallback={len(fallbacks)}"
          f"{' (' + ', '.join(fallbacks) + ')' if fallbacks else ''} interpreter={interpreting()} "
          f"seconds={time.perf_counter() - started:.1f} torch={torch.__version__} "
          f"device={describe_device(device).replace(' ', '_')}")
    return 1 if fallbacks else 0


if __name__ == "__main__":
    sys.exit(main())
