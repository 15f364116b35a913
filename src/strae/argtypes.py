"""argparse ``type=`` checks shared by every trainer's command line: argparse names the option in its error, so a bad
value stops the command before anything is written. Without them, `--epochs 0` or `--steps 0` wrote a "completed"
run of untrained weights, `--lr nan` trained garbage silently, and a zero interval divided by zero mid-run."""
from __future__ import annotations

import argparse
import math


def positive_int(text: str) -> int:
    """An integer >= 1 (step counts, epochs, intervals, batch and window sizes)."""
    return _int_at_least(text, 1)


def nonnegative_int(text: str) -> int:
    """An integer >= 0 (an interval where 0 means off)."""
    return _int_at_least(text, 0)


def _int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
    return value


def finite_float(text: str) -> float:
    """A finite number (float() alone accepts nan and inf)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (learning rates, scales)."""
    value = finite_float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def nonnegative_float(text: str) -> float:
    """A finite number >= 0 (exponents, probabilities' lower side, norms where 0 means off)."""
    value = finite_float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def fraction(text: str) -> float:
    """A finite number in [0, 1) (a warm-up share of the steps)."""
    value = finite_float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return value


def probability(text: str) -> float:
    """A finite number in (0, 1) (a masking probability: 0 masks nothing to learn from, 1 leaves no context)."""
    value = finite_float(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text}")
    return value
