"""Grid specification parsing and validation.

A grid is given on the command line as repeated ``--grid key=v1,v2,...`` options. Every key is
validated up front, on the driver, so that a typo stops the run with one clear message before
any Java process is started (a bad value found inside a Spark task would surface as a Java stack
trace much later).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any


class GridError(ValueError):
    """A grid specification that cannot be run; the message is shown to the user as is."""


def _int_at_least(minimum: int) -> Callable[[str, str], int]:
    def parse(key: str, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise GridError(f"--grid {key}: {raw!r} is not an integer") from None
        if value < minimum:
            raise GridError(f"--grid {key}: {value} is below the minimum {minimum}")
        return value

    return parse


def _number_at_least(minimum: float) -> Callable[[str, str], float | int]:
    def parse(key: str, raw: str) -> float | int:
        try:
            value: float | int = int(raw)
        except ValueError:
            try:
                value = float(raw)
            except ValueError:
                raise GridError(f"--grid {key}: {raw!r} is not a number") from None
        if not value >= minimum:  # also rejects nan
            raise GridError(f"--grid {key}: {raw} is below the minimum {minimum}")
        return value

    return parse


def _choice(choices: Sequence[str], aliases: dict[str, str] | None = None) -> Callable[
    [str, str], str
]:
    def parse(key: str, raw: str) -> str:
        value = raw.strip().lower()
        value = (aliases or {}).get(value, value)
        if value not in choices:
            raise GridError(
                f"--grid {key}: {raw!r} is not one of {', '.join(choices)}"
            )
        return value

    return parse


def _bool(key: str, raw: str) -> str:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise GridError(f"--grid {key}: {raw!r} is not true or false")
    return value


@dataclass(frozen=True)
class Setting:
    """One tunable: how to parse it and its value when the grid does not vary it."""

    parse: Callable[[str, str], Any]
    default: Any
    # False for harness settings (record.size) that are not librdkafka configuration.
    client_config: bool = True


# The settings a grid may vary. Defaults for the librdkafka settings are librdkafka's own
# (2.x), so a results row always states the effective value of every core setting.
SETTINGS: dict[str, Setting] = {
    "batch.size": Setting(_int_at_least(1), 1_000_000),
    "linger.ms": Setting(_number_at_least(0), 5),
    # "-1" is Kafka's spelling of "all"; normalise so results group cleanly.
    "acks": Setting(_choice(["0", "1", "all"], {"-1": "all"}), "all"),
    "compression.type": Setting(
        _choice(["none", "gzip", "snappy", "lz4", "zstd"]), "none"
    ),
    "record.size": Setting(_int_at_least(1), 100, client_config=False),
    "batch.num.messages": Setting(_int_at_least(1), 10_000),
    "max.in.flight.requests.per.connection": Setting(_int_at_least(1), 1_000_000),
    "queue.buffering.max.messages": Setting(_int_at_least(1), 100_000),
    "queue.buffering.max.kbytes": Setting(_int_at_least(1), 1_048_576),
    "enable.idempotence": Setting(_bool, "false"),
}

# Always written to the results, in this order, whether or not the grid varies them.
CORE_KEYS: tuple[str, ...] = ("batch.size", "linger.ms", "acks", "compression.type", "record.size")


@dataclass(frozen=True)
class Grid:
    """Parsed grid: the varied keys in command-line order with their values."""

    axes: dict[str, list[Any]]

    @property
    def keys(self) -> list[str]:
        return list(self.axes)

    def cells(self) -> list[dict[str, Any]]:
        """Every combination, with the core settings filled in from the defaults."""
        base = {key: SETTINGS[key].default for key in CORE_KEYS}
        cells = []
        for combo in itertools.product(*self.axes.values()):
            cell = dict(base)
            cell.update(zip(self.axes, combo, strict=True))
            cells.append(cell)
        return cells

    def __len__(self) -> int:
        n = 1
        for values in self.axes.values():
            n *= len(values)
        return n


def parse_grid(specs: Iterable[str]) -> Grid:
    """Parse ``key=v1,v2`` strings into a :class:`Grid`, raising :class:`GridError`."""
    axes: dict[str, list[Any]] = {}
    for spec in specs:
        key, sep, raw_values = spec.partition("=")
        key = key.strip()
        if not sep or not key:
            raise GridError(f"--grid {spec!r}: expected key=value1,value2,...")
        if key not in SETTINGS:
            known = ", ".join(SETTINGS)
            raise GridError(f"--grid {key}: unknown setting (known: {known})")
        if key in axes:
            raise GridError(f"--grid {key}: given more than once")
        raws = [raw.strip() for raw in raw_values.split(",")]
        if not raw_values.strip() or any(not raw for raw in raws):
            raise GridError(f"--grid {key}: empty value list or empty value in {raw_values!r}")
        values = [SETTINGS[key].parse(key, raw) for raw in raws]
        # Keep the first occurrence: a repeated value would only repeat a cell.
        axes[key] = list(dict.fromkeys(values))
    return Grid(axes)


def client_config(cell: dict[str, Any]) -> dict[str, Any]:
    """The librdkafka configuration entries of a cell (harness-only settings removed)."""
    return {
        key: (str(value) if key == "acks" else value)
        for key, value in cell.items()
        if key in SETTINGS and SETTINGS[key].client_config
    }
