"""Run the micro-benchmarks and print pylog's speed as a multiple of each reference.

Every benchmark group holds pylog's implementation (a test whose name contains
"pylog") and one or more references measured in the same run. The ratio is
reference time / pylog time on the median, so 2.0x means pylog takes half the
time. Throughput figures a benchmark records in ``extra_info`` are shown too.

    python benchmarks/report.py [pytest args, e.g. -k crc32c]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_benchmarks(extra: list[str]) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        cmd = [
            sys.executable, "-m", "pytest", str(HERE), "-q", "-p", "no:cacheprovider",
            "--benchmark-enable", "--benchmark-only", f"--benchmark-json={out}", *extra,
        ]
        proc = subprocess.run(cmd, cwd=HERE.parent)
        if proc.returncode != 0 or not out.exists():
            raise SystemExit(f"benchmarks failed (pytest exit {proc.returncode})")
        return json.loads(out.read_text())["benchmarks"]


def _short(name: str) -> str:
    return name.removeprefix("test_")


def _extra(bench: dict) -> str:
    info = bench.get("extra_info") or {}
    return ", ".join(
        f"{k}={v:,.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(info.items())
    )


def table(benchmarks: list[dict]) -> list[str]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for b in benchmarks:
        groups[b.get("group") or b["name"]].append(b)
    rows = [("group", "pylog", "median", "reference", "median", "ratio", "extra")]
    for group in sorted(groups):
        members = groups[group]
        ours = [b for b in members if "pylog" in b["name"].lower()]
        refs = [b for b in members if b not in ours]
        for mine in ours:
            m = mine["stats"]["median"]
            for ref in refs or [None]:
                r = ref["stats"]["median"] if ref else None
                rows.append((
                    group, _short(mine["name"]), f"{m * 1e6:,.2f} us",
                    _short(ref["name"]) if ref else "-",
                    f"{r * 1e6:,.2f} us" if ref else "-",
                    f"{r / m:.2f}x" if ref else "-",
                    _extra(mine),
                ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def main(argv: list[str]) -> int:
    benchmarks = run_benchmarks(argv)
    print()
    print("\n".join(table(benchmarks)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
