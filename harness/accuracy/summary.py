"""The table printed at the end of `pytest suites/accuracy`: one row per candidate, one column per slice."""

from __future__ import annotations

import math

import pytest

SUMMARY_KEY = pytest.StashKey[dict]()

SLICES = ("all", "day", "night", "small", "large")


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.3f}"
    return str(value)


def summary_table(rows: dict[str, dict]) -> str:
    """rows: name -> {"map": {slice: {...}}, "matched": float, "verdict": str, "seconds": float}."""
    head = f"{'candidate':<44} " + " ".join(f"{s:>7}" for s in SLICES) + f" {'matched':>8} {'secs':>6}  verdict"
    lines = [head, "-" * len(head)]
    ordered = sorted(rows.items(), key=lambda kv: (not kv[0].startswith("fp32 reference"), kv[1].get("conf", 0), kv[0]))
    for name, row in ordered:
        metrics = row.get("map", {})
        cells = " ".join(f"{_fmt(metrics.get(s, {}).get('mAP50_95')):>7}" for s in SLICES)
        matched = row.get("matched")
        label = name if row.get("conf", 0.001) <= 0.001 or name.startswith("fp32") else f"{name} @conf {row['conf']:g}"
        lines.append(f"{label[:44]:<44} {cells} {_fmt(matched) if matched is None else f'{matched:>8.1%}':>8}"
                     f" {_fmt(row.get('seconds')):>6}  {', '.join(row.get('verdicts', [])) or '-'}")
    return "\n".join(lines)


def record(config: pytest.Config, name: str, key: str, value) -> None:
    config.stash.setdefault(SUMMARY_KEY, {}).setdefault(name, {})[key] = value


def verdict(config: pytest.Config, name: str, failed_check: str) -> None:
    config.stash.setdefault(SUMMARY_KEY, {}).setdefault(name, {}).setdefault("verdicts", []).append(failed_check)
