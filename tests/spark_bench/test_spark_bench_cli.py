"""``python -m spark_bench`` as a subprocess: the user errors, recommend/report, the screenshot."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from spark_bench.driver import write_parquet

ROOT = Path(__file__).resolve().parents[2]
GRID = ["--grid", "batch.size=16384", "--grid", "acks=1"]


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spark_bench", *args], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=timeout,
    )


def assert_one_clear_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("spark_bench: error: ")
    for needle in needles:
        assert needle in lines[0]
    assert "Traceback" not in proc.stderr and "at org.apache" not in proc.stderr


@pytest.mark.parametrize(
    ("grid", "needle"),
    [
        ("colour=red", "unknown setting"),
        ("batch.size=", "empty"),
        ("batch.size=16k", "not an integer"),
        ("acks=2", "acks"),
    ],
)
def test_bad_grid(grid: str, needle: str, tmp_path: Path) -> None:
    proc = run_cli("sweep", "--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--grid", grid,
                   "--tasks", "1", "--records-per-task", "1", "--out", str(tmp_path))
    assert_one_clear_error(proc, needle)


def test_missing_java(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = os.pathsep.join(
        d for d in env.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "java").exists()
    )
    proc = run_cli("sweep", "--bootstrap-server", "127.0.0.1:1", "--topic", "t", *GRID,
                   "--tasks", "1", "--records-per-task", "1", "--out", str(tmp_path), env=env)
    assert_one_clear_error(proc, "Java", "JAVA_HOME")


def test_unreachable_broker(tmp_path: Path) -> None:
    pytest.importorskip("confluent_kafka")
    proc = run_cli("sweep", "--bootstrap-server", "127.0.0.1:1", "--topic", "t", *GRID,
                   "--tasks", "1", "--records-per-task", "1", "--out", str(tmp_path),
                   "--broker-timeout", "2")
    assert_one_clear_error(proc, "127.0.0.1:1", "unreachable")
    assert not (tmp_path / "results.parquet").exists()


def synthetic_results(directory: Path) -> None:
    from test_spark_bench_units import synthetic_rows

    write_parquet(synthetic_rows(), directory / "results.parquet")


def test_recommend_cli(tmp_path: Path) -> None:
    synthetic_results(tmp_path)
    proc = run_cli("recommend", str(tmp_path), "--max-p99-ms", "10")
    assert proc.returncode == 0, proc.stderr
    assert "batch.size = 131072" in proc.stdout and "p99 9.00 ms" in proc.stdout
    assert "Pareto front" in proc.stdout
    assert run_cli("recommend", str(tmp_path), "--max-p99-ms", "0.5").returncode == 1


# ----------------------------------------------------------------- headless-Chromium screenshot


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Minimal PNG decoder (8-bit RGB/RGBA, non-interlaced): (width, height, rows)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    assert header is not None
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        filt = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if filt == 1:
                line[i] = (line[i] + a) & 0xFF
            elif filt == 2:
                line[i] = (line[i] + b) & 0xFF
            elif filt == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif filt == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def chromium_binary(system_command) -> str | None:
    for name in ("chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return system_command("chromium", "chromium")


def test_report_screenshot(tmp_path: Path, system_command) -> None:
    synthetic_results(tmp_path)
    page = tmp_path / "report.html"
    assert run_cli("report", str(tmp_path), "-o", str(page)).returncode == 0
    browser = chromium_binary(system_command)
    if browser is None:
        pytest.skip("no chromium (and cannot apt-get install it)")
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--window-size=1200,1400", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert shot.is_file(), proc.stderr
    width, height, rows = png_pixels(shot.read_bytes())
    assert (width, height) == (1200, 1400)
    colours = set()
    for row in rows[::10]:
        step = len(row) // width
        colours.update(row[i:i + 3] for i in range(0, len(row), step * 5))
    # A blank page is one colour; plots and the viridis heat maps give many.
    assert len(colours) > 20
    # Something drawn in the plot area, not just text: viridis purple of the heat map.
    assert any(abs(c[0] - 68) < 30 and c[1] < 60 and abs(c[2] - 84) < 40 for c in colours)


def test_mock_broker_subcommand() -> None:
    """``mock-broker`` (librdkafka's in-memory cluster, for trying the harness without a broker)
    prints a bootstrap address that answers Metadata, and exits after --seconds."""
    pytest.importorskip("confluent_kafka")
    from spark_bench.driver import check_broker

    proc = subprocess.Popen([sys.executable, "-m", "spark_bench", "mock-broker", "--seconds", "3"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        bootstrap = proc.stdout.readline().strip()
        host, _, port = bootstrap.partition(":")
        assert host and port.isdigit(), bootstrap
        assert check_broker(bootstrap, timeout_s=5) == 1
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
