"""Self-contained HTML dashboard: inline SVG generated here, a few lines of inline JS for table
sorting, no network references (the page must open on an air-gapped machine)."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pylog import histo
from spark_bench.recommend import load_results, pareto_front, setting_keys

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#7f7f7f", "#bcbd22"]
# Viridis endpoints and midpoints, interpolated linearly for heat maps.
VIRIDIS = [(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)]

W, H = 560, 360
M_LEFT, M_RIGHT, M_TOP, M_BOTTOM = 70, 150, 30, 50


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}" if abs(value) >= 10000 else str(int(value))
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.0f}"
    if abs(value) >= 1:
        return f"{value:.1f}"
    return f"{value:.2g}"


def _nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1.0
    step = 10 ** math.floor(math.log10((hi - lo) / count))
    for mult in (1, 2, 5, 10):
        if (hi - lo) / (step * mult) <= count:
            step *= mult
            break
    start = math.floor(lo / step) * step
    ticks = []
    value = start
    while value <= hi + step * 1e-9:
        if value >= lo - step * 1e-9:
            ticks.append(round(value, 12))
        value += step
    return ticks


def _log_ticks(lo: float, hi: float) -> list[float]:
    ticks = []
    for exp in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for mult in (1, 2, 5):
            value = mult * 10.0 ** exp
            if lo <= value <= hi:
                ticks.append(value)
    if len(ticks) < 3:  # a narrow range: use every integer multiple of the decade
        ticks = [m * 10.0 ** e
                 for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
                 for m in range(1, 10) if lo <= m * 10.0 ** e <= hi]
        if len(ticks) > 6:
            ticks = ticks[:: math.ceil(len(ticks) / 6)]
    return ticks or [lo, hi]


class Axis:
    """Maps data to pixels, linear or log10."""

    def __init__(self, lo: float, hi: float, p0: float, p1: float, log: bool = False) -> None:
        if log:
            lo, hi = max(lo, 1e-6), max(hi, 1e-6)
            if hi / lo < 1.01:
                lo, hi = lo / 1.5, hi * 1.5
            lo, hi = lo / 1.15, hi * 1.15
        else:
            if hi - lo < 1e-12:
                lo, hi = lo - 1, hi + 1
            pad = (hi - lo) * 0.06
            lo, hi = (0.0 if lo >= 0 and lo - pad < 0 else lo - pad), hi + pad
        self.lo, self.hi, self.p0, self.p1, self.log = lo, hi, p0, p1, log

    def __call__(self, value: float) -> float:
        if self.log:
            frac = (math.log10(max(value, 1e-9)) - math.log10(self.lo)) / (
                math.log10(self.hi) - math.log10(self.lo))
        else:
            frac = (value - self.lo) / (self.hi - self.lo)
        return self.p0 + frac * (self.p1 - self.p0)

    def ticks(self) -> list[float]:
        return _log_ticks(self.lo, self.hi) if self.log else _nice_ticks(self.lo, self.hi)


def _frame(title: str, x_axis: Axis, y_axis: Axis, x_label: str, y_label: str,
           x_ticks: Sequence[tuple[float, str]] | None = None) -> list[str]:
    parts = [
        f'<svg width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" class="plot" role="img" aria-label="{_esc(title)}">',
        f'<text x="{W / 2 - M_RIGHT / 2 + M_LEFT / 2}" y="18" text-anchor="middle" '
        f'class="title">{_esc(title)}</text>',
        f'<rect x="{M_LEFT}" y="{M_TOP}" width="{W - M_LEFT - M_RIGHT}" '
        f'height="{H - M_TOP - M_BOTTOM}" class="area"/>',
    ]
    for value, label in x_ticks or [(t, _fmt(t)) for t in x_axis.ticks()]:
        x = x_axis(value)
        parts.append(f'<line x1="{x:.1f}" y1="{M_TOP}" x2="{x:.1f}" y2="{H - M_BOTTOM}" '
                     'class="grid"/>')
        parts.append(f'<text x="{x:.1f}" y="{H - M_BOTTOM + 16}" text-anchor="middle" '
                     f'class="tick">{_esc(label)}</text>')
    for value in y_axis.ticks():
        y = y_axis(value)
        parts.append(f'<line x1="{M_LEFT}" y1="{y:.1f}" x2="{W - M_RIGHT}" y2="{y:.1f}" '
                     'class="grid"/>')
        parts.append(f'<text x="{M_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" '
                     f'class="tick">{_fmt(value)}</text>')
    parts.append(f'<text x="{(M_LEFT + W - M_RIGHT) / 2}" y="{H - 10}" text-anchor="middle" '
                 f'class="label">{_esc(x_label)}</text>')
    parts.append(f'<text transform="translate(16,{(M_TOP + H - M_BOTTOM) / 2}) rotate(-90)" '
                 f'text-anchor="middle" class="label">{_esc(y_label)}</text>')
    return parts


def _legend(entries: Sequence[tuple[str, str]], kind: str = "dot") -> list[str]:
    parts = []
    for i, (label, color) in enumerate(entries):
        y = M_TOP + 10 + i * 18
        x = W - M_RIGHT + 12
        if kind == "dot":
            parts.append(f'<circle cx="{x + 5}" cy="{y}" r="5" fill="{color}"/>')
        else:
            parts.append(f'<line x1="{x}" y1="{y}" x2="{x + 14}" y2="{y}" stroke="{color}" '
                         'stroke-width="2.5"/>')
        parts.append(f'<text x="{x + 20}" y="{y + 4}" class="tick">{_esc(label)}</text>')
    return parts


def _cell_label(row: dict[str, Any], keys: Sequence[str]) -> str:
    return " ".join(f"{k}={row.get(k)}" for k in keys)


def scatter_svg(rows: list[dict[str, Any]], keys: Sequence[str], metric: str = "mb_per_s"
                ) -> str:
    """Throughput against p99, one colour per acks value; the Pareto front is joined."""
    points = [r for r in rows if _num(r.get("p99_ms")) and _num(r.get(metric)) is not None]
    if not points:
        return '<p class="empty">no cells with latency data</p>'
    x_axis = Axis(min(r["p99_ms"] for r in points), max(r["p99_ms"] for r in points),
                  M_LEFT, W - M_RIGHT, log=True)
    y_axis = Axis(0.0, max(r[metric] for r in points), H - M_BOTTOM, M_TOP)
    unit = "MB/s" if metric == "mb_per_s" else "records/s"
    parts = _frame(f"Throughput against p99 latency ({unit})", x_axis, y_axis,
                   "p99 latency (ms, log scale)", unit)
    front = pareto_front(points, metric)
    if len(front) > 1:
        path = " ".join(f"{x_axis(r['p99_ms']):.1f},{y_axis(r[metric]):.1f}" for r in front)
        parts.append(f'<polyline points="{path}" class="front"/>')
    groups = sorted({str(r.get("acks")) for r in points})
    colors = {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(groups)}
    for r in points:
        tip = (f"{_cell_label(r, keys)}\n{r[metric]:.3g} {unit}, p99 {r['p99_ms']:.3g} ms"
               + (" (client-bound)" if r.get("client_bound") else ""))
        hollow = ' fill-opacity="0.25" stroke-width="1.5"' if r.get("client_bound") else ""
        color = colors[str(r.get("acks"))]
        parts.append(f'<circle cx="{x_axis(r["p99_ms"]):.1f}" cy="{y_axis(r[metric]):.1f}" '
                     f'r="5" fill="{color}" stroke="{color}"{hollow}>'
                     f'<title>{_esc(tip)}</title></circle>')
    parts += _legend([(f"acks={g}", colors[g]) for g in groups])
    parts.append(f'<text x="{W - M_RIGHT + 12}" y="{M_TOP + 20 + len(groups) * 18}" '
                 'class="tick">- - Pareto front</text>')
    parts.append(f'<text x="{W - M_RIGHT + 12}" y="{M_TOP + 38 + len(groups) * 18}" '
                 'class="tick">pale = client-bound</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _viridis(frac: float) -> str:
    frac = min(max(frac, 0.0), 1.0) * (len(VIRIDIS) - 1)
    i = min(int(frac), len(VIRIDIS) - 2)
    t = frac - i
    rgb = [round(a + (b - a) * t) for a, b in zip(VIRIDIS[i], VIRIDIS[i + 1], strict=True)]
    return "#" + "".join(f"{c:02x}" for c in rgb)


def heatmap_svg(rows: list[dict[str, Any]], value_key: str, title: str,
                reduce: Callable[[list[float]], float], higher_is_better: bool) -> str:
    """batch.size (rows) x linger.ms (columns); other settings reduced with ``reduce``."""
    batches = sorted({r["batch.size"] for r in rows})
    lingers = sorted({r["linger.ms"] for r in rows})
    values: dict[tuple[Any, Any], float] = {}
    for b in batches:
        for lg in lingers:
            vals = [v for r in rows if r["batch.size"] == b and r["linger.ms"] == lg
                    and (v := _num(r.get(value_key))) is not None]
            if vals:
                values[(b, lg)] = reduce(vals)
    if not values:
        return '<p class="empty">no data</p>'
    lo, hi = min(values.values()), max(values.values())
    cw = min(90, (W - 130) / max(len(lingers), 1))
    ch = min(44, (H - 90) / max(len(batches), 1))
    width = 110 + cw * len(lingers) + 20
    height = 60 + ch * len(batches) + 30
    parts = [f'<svg width="{width:.0f}" '
             f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" class="plot heat" '
             f'role="img" aria-label="{_esc(title)}">',
             f'<text x="{width / 2:.0f}" y="18" text-anchor="middle" class="title">'
             f'{_esc(title)}</text>',
             f'<text x="{110 + cw * len(lingers) / 2:.0f}" y="40" text-anchor="middle" '
             'class="label">linger.ms</text>',
             f'<text transform="translate(14,{60 + ch * len(batches) / 2:.0f}) rotate(-90)" '
             'text-anchor="middle" class="label">batch.size</text>']
    for j, lg in enumerate(lingers):
        parts.append(f'<text x="{110 + cw * (j + 0.5):.1f}" y="55" text-anchor="middle" '
                     f'class="tick">{_esc(lg)}</text>')
    for i, b in enumerate(batches):
        y = 60 + ch * i
        parts.append(f'<text x="104" y="{y + ch / 2 + 4:.1f}" text-anchor="end" '
                     f'class="tick">{_esc(b)}</text>')
        for j, lg in enumerate(lingers):
            x = 110 + cw * j
            if (b, lg) not in values:
                parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{cw:.1f}" height="{ch:.1f}" '
                             'fill="#eee"/>')
                continue
            v = values[(b, lg)]
            frac = (v - lo) / (hi - lo) if hi > lo else 1.0
            frac = frac if higher_is_better else 1.0 - frac  # bright = good in both maps
            text_color = "#000" if frac > 0.55 else "#fff"
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{cw:.1f}" height="{ch:.1f}" '
                         f'fill="{_viridis(frac)}"><title>batch.size={b} linger.ms={lg}: '
                         f'{_fmt(v)}</title></rect>')
            parts.append(f'<text x="{x + cw / 2:.1f}" y="{y + ch / 2 + 4:.1f}" '
                         f'text-anchor="middle" class="cellval" fill="{text_color}">'
                         f'{_fmt(v)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def percentile_svg(rows: list[dict[str, Any]], keys: Sequence[str], hist_key: str = "hist",
                   title: str = "Latency by percentile") -> str:
    """HDR-style plot: latency against percentile on a 'nines' axis (x = log10(1/(1-p)))."""
    curves = []
    for r in rows:
        if r.get(hist_key):
            points = histo.percentile_curve(histo.decode(r[hist_key]))
            if points:
                curves.append((r, points))
    if not curves:
        return '<p class="empty">no histograms</p>'

    def nines(pct: float, top: float) -> float:
        return top if pct >= 100.0 else math.log10(1.0 / (1.0 - pct / 100.0))

    top = max(max(nines(p, 0) for p, _ in pts if p < 100) for _, pts in curves) + 0.4
    lat = [v for _, pts in curves for _, v in pts if v > 0]
    log_y = bool(lat) and max(lat) / max(min(lat), 1e-6) > 30
    x_axis = Axis(0.0, top, M_LEFT, W - M_RIGHT)
    x_axis.lo, x_axis.hi = 0.0, top  # no padding: 0 is the 0th percentile
    y_axis = Axis(min(lat) if lat else 0.001, max(lat) if lat else 1.0, H - M_BOTTOM, M_TOP,
                  log=log_y)
    labels = {0: "0%", 1: "90%", 2: "99%", 3: "99.9%", 4: "99.99%", 5: "99.999%"}
    ticks = [(float(n), labels[n]) for n in labels if n < top - 0.45] + [(top, "max")]
    parts = _frame(title, x_axis, y_axis, "percentile", "latency (ms" +
                   (", log scale)" if log_y else ")"), x_ticks=ticks)
    legend = []
    for i, (r, pts) in enumerate(curves):
        color = PALETTE[i % len(PALETTE)]
        path = " ".join(f"{x_axis(nines(p, top)):.1f},{y_axis(max(v, 1e-6)):.1f}"
                        for p, v in pts)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" '
                     f'stroke-width="2"><title>{_esc(_cell_label(r, keys))}</title></polyline>')
        legend.append((f"cell {r.get('cell')}", color))
    parts += _legend(legend, kind="line")
    parts.append("</svg>")
    return "\n".join(parts)


def table_html(rows: list[dict[str, Any]], keys: Sequence[str]) -> str:
    metrics = ["records", "seconds", "records_per_s", "mb_per_s", "p50_ms", "p95_ms", "p99_ms",
               "p99_9_ms", "max_ms", "errors", "client_cpu_util", "client_bound",
               "batchsize_avg", "rtt_avg_ms", "spark_overhead_s"]
    if any("e2e_p99_ms" in r for r in rows):
        metrics += ["e2e_p50_ms", "e2e_p99_ms"]
    columns = ["cell", *keys, *metrics]
    head = "".join(f'<th onclick="sortTable(this)">{_esc(c)}</th>' for c in columns)
    body = []
    for r in rows:
        cells = []
        for c in columns:
            v = r.get(c)
            num = _num(v)
            if isinstance(v, bool):
                cells.append(f'<td data-v="{int(v)}">{"yes" if v else ""}</td>')
            elif num is not None and c not in keys:
                cells.append(f'<td data-v="{num!r}">{_fmt(num)}</td>')
            elif num is not None:
                cells.append(f'<td data-v="{num!r}">{_esc(v)}</td>')
            else:
                cells.append(f"<td>{_esc('-' if v is None else v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<table id="cells"><thead><tr>{head}</tr></thead><tbody>'
            + "\n".join(body) + "</tbody></table>")


_CSS = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; }
.plots { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
svg.plot { background: #fff; border: 1px solid #ddd; }
svg .title { font-size: 14px; font-weight: 600; } svg .label { font-size: 12px; }
svg .tick { font-size: 11px; fill: #444; } svg .cellval { font-size: 11px; }
svg .area { fill: #fafafa; stroke: #bbb; } svg .grid { stroke: #e4e4e4; }
svg .front { fill: none; stroke: #555; stroke-dasharray: 5 4; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; }
th { background: #f0f0f0; cursor: pointer; position: sticky; top: 0; }
tr:nth-child(even) td { background: #fafafa; }
.meta { color: #555; font-size: 13px; }
"""

_JS = """
function sortTable(th) {
  const table = th.closest('table'), body = table.tBodies[0];
  const col = Array.from(th.parentNode.children).indexOf(th);
  const asc = th.dataset.dir !== 'asc'; th.dataset.dir = asc ? 'asc' : 'desc';
  const key = td => td.dataset.v !== undefined ? parseFloat(td.dataset.v) : td.textContent;
  const rows = Array.from(body.rows).sort((a, b) => {
    const x = key(a.cells[col]), y = key(b.cells[col]);
    return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
  });
  rows.forEach(r => body.appendChild(r));
}
"""


def render_report(rows: list[dict[str, Any]], meta: dict[str, Any] | None = None,
                  top: int = 5, metric: str = "mb_per_s") -> str:
    keys = setting_keys(rows)
    sections = []
    sections.append("<h2>Throughput against p99</h2><div class='plots'>"
                    + scatter_svg(rows, keys, metric) + "</div>")
    heat = []
    for acks in sorted({str(r.get("acks")) for r in rows}):
        subset = [r for r in rows if str(r.get("acks")) == acks]
        heat.append(heatmap_svg(subset, metric, f"acks={acks}: best MB/s", max, True))
        heat.append(heatmap_svg(subset, "p99_ms", f"acks={acks}: lowest p99 (ms)", min, False))
    others = [k for k in keys if k not in ("batch.size", "linger.ms", "acks")
              and len({r.get(k) for r in rows}) > 1]
    note = (f"<p class='meta'>Each square shows the best over {', '.join(others)}.</p>"
            if others else "")
    sections.append("<h2>batch.size &times; linger.ms</h2>" + note
                    + "<div class='plots'>" + "".join(heat) + "</div>")
    best = sorted((r for r in rows if _num(r.get(metric)) is not None),
                  key=lambda r: -r[metric])[:top]
    curves = percentile_svg(best, keys, title=f"Latency by percentile, top {len(best)} cells")
    if any(r.get("e2e_hist") for r in best):
        curves += percentile_svg(best, keys, "e2e_hist", "End-to-end latency by percentile")
    sections.append("<h2>Latency percentiles of the highest-throughput cells</h2>"
                    "<div class='plots'>" + curves + "</div>")
    sections.append("<h2>Cells</h2>" + table_html(rows, keys))
    meta_html = ""
    if meta:
        shown = {k: meta.get(k) for k in ("bootstrap", "topic", "tasks", "records_per_task",
                                          "duration_s", "target_rate", "warmup_s", "master",
                                          "payload") if meta.get(k) is not None}
        meta_html = ("<p class='meta'>" + ", ".join(f"{_esc(k)}: {_esc(v)}"
                                                    for k, v in shown.items()) + "</p>")
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            "<title>spark_bench report</title>"
            f"<style>{_CSS}</style><script>{_JS}</script></head><body>"
            f"<h1>spark_bench sweep: {len(rows)} cells</h1>{meta_html}"
            + "\n".join(sections) + "</body></html>\n")


def write_report(directory: Path, output: Path, top: int = 5) -> None:
    rows = load_results(directory)
    meta_path = Path(directory) / "sweep.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else None
    Path(output).write_text(render_report(rows, meta, top=top), encoding="utf-8")
