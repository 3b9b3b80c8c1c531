"""Tuner: the highest-throughput settings within a p99 bound; the throughput/p99 Pareto front."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from spark_bench.grid import CORE_KEYS, SETTINGS


def load_results(directory: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    path = Path(directory) / "results.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (run `python -m spark_bench sweep` first)")
    return pq.read_table(path).to_pylist()


def setting_keys(rows: list[dict[str, Any]]) -> list[str]:
    """Setting columns present in the results, core ones first."""
    present = set().union(*(row.keys() for row in rows)) if rows else set()
    return [key for key in CORE_KEYS if key in present] + [
        key for key in SETTINGS if key not in CORE_KEYS and key in present
    ]


def _valid(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def pareto_front(rows: list[dict[str, Any]], metric: str = "mb_per_s") -> list[dict[str, Any]]:
    """Cells no other cell beats on both throughput (higher) and p99 (lower), by rising p99.

    Ties: of cells with equal p99 only the highest throughput survives; a cell with equal
    throughput but higher p99 than one already on the front is dominated.
    """
    candidates = [r for r in rows if _valid(r.get("p99_ms")) and _valid(r.get(metric))]
    candidates.sort(key=lambda r: (r["p99_ms"], -r[metric]))
    front: list[dict[str, Any]] = []
    best = -math.inf
    for row in candidates:
        if row[metric] > best:
            front.append(row)
            best = row[metric]
    return front


def recommend(
    rows: list[dict[str, Any]], max_p99_ms: float, metric: str = "mb_per_s",
    allow_errors: bool = False,
) -> dict[str, Any]:
    """Best cell within the bound (None when no cell qualifies) and the Pareto front."""
    keys = setting_keys(rows)
    eligible = [r for r in rows if allow_errors or not r.get("errors")]
    within = [r for r in eligible
              if _valid(r.get("p99_ms")) and r["p99_ms"] <= max_p99_ms and _valid(r.get(metric))]
    best = max(within, key=lambda r: (r[metric], -r["p99_ms"])) if within else None

    def summary(row: dict[str, Any]) -> dict[str, Any]:
        out = {key: row.get(key) for key in keys}
        for name in ("records_per_s", "mb_per_s", "p50_ms", "p99_ms", "max_ms", "errors",
                     "client_bound", "cell"):
            out[name] = row.get(name)
        return out

    return {
        "max_p99_ms": max_p99_ms,
        "metric": metric,
        "cells": len(rows),
        "excluded_for_errors": len(rows) - len(eligible),
        "within_bound": len(within),
        "best": summary(best) if best else None,
        "front": [summary(r) for r in pareto_front(eligible, metric)],
        "setting_keys": keys,
    }


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return str(value)


def format_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    cells = [[_fmt(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c)
              for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def format_recommendation(result: dict[str, Any], metric: str) -> str:
    keys = result["setting_keys"]
    lines: list[str] = []
    best = result["best"]
    bound = result["max_p99_ms"]
    if best is None:
        lines.append(f"No cell has p99 <= {bound:g} ms"
                     + (f" ({result['excluded_for_errors']} cells with errors excluded)"
                        if result["excluded_for_errors"] else "") + ".")
    else:
        lines.append(f"Highest {metric} with p99 <= {bound:g} ms "
                     f"({result['within_bound']} of {result['cells']} cells qualify):")
        for key in keys:
            lines.append(f"  {key} = {best[key]}")
        lines.append(f"  -> {best['records_per_s']:,.0f} records/s, {best['mb_per_s']:.2f} MB/s, "
                     f"p50 {best['p50_ms']:.2f} ms, p99 {best['p99_ms']:.2f} ms"
                     + (" (client-bound: the producer tasks, not the broker, were the limit)"
                        if best.get("client_bound") else ""))
        client = {k: best[k] for k in keys if k in SETTINGS and SETTINGS[k].client_config}
        lines.append("  librdkafka: " + " ".join(f"{k}={v}" for k, v in client.items()))
    lines.append("")
    lines.append(f"Pareto front ({metric} against p99, {len(result['front'])} cells):")
    lines.append(format_table(result["front"],
                              keys + ["records_per_s", "mb_per_s", "p99_ms", "client_bound"]))
    return "\n".join(lines)
