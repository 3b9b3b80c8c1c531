"""Client quotas (Kafka docs 4.9 and 6.x "Setting quotas"): the configured
quotas, which of them applies to a client, and the rates that decide throttling.

**Configured quotas.**  :class:`QuotaStore` holds what AlterClientQuotas set,
per entity: a user, a client id, or both, each a name or the default
(``<default>``, a null name on the wire).  It is saved in
``<log.dir>/pylog-client-quotas.json``, atomically, before an alteration is
acknowledged, as Kafka writes a quota record before it answers.

**Which quota applies** to a request of (user, client id) is Kafka's order of
precedence (``DefaultQuotaCallback``): /users/<user>/clients/<client-id>, then
/users/<user>/clients/<default>, /users/<user>, /users/<default>/clients/<client-id>,
/users/<default>/clients/<default>, /users/<default>, /clients/<client-id>,
/clients/<default>.  The level that matched also says who shares the quota:
a user-level quota is shared by every client id of that user, a client-id
level one by every connection with that client id (Kafka's metric tags).
Without SASL every connection's user is ``ANONYMOUS``, as in Kafka.

**Rates** are Kafka's ``Rate`` over ``quota.window.num`` samples of
``quota.window.size.seconds`` each: the bytes (or request time) recorded in
the retained samples over the time they span, counted as at least
``num - 1`` whole windows.  A request that takes the rate over the bound is
throttled by X = (rate - bound) / bound * window ms, the delay that brings the
rate back to the bound (ClientQuotaManager.throttleTime); the broker answers at
once with that ``throttle_time_ms`` and then reads nothing more from the
connection for that long (KIP-219, :meth:`pylog.net.connection.Connection.throttle`).

Three quota keys are enforced: ``producer_byte_rate`` (the bytes of each
Produce request), ``consumer_byte_rate`` (the bytes of each Fetch response; a
throttled fetch is answered empty and its bytes are not counted) and
``request_percentage`` (the time the event loop spends on a client's
requests, as a percentage of one thread; its throttle is capped at one
window, as Kafka's request quota).  ``controller_mutation_rate`` and the ip
entity's ``connection_creation_rate`` are refused (INVALID_REQUEST, with a
message that says so): pylog does not enforce them, and a quota that is
accepted but not applied would mislead.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable
from pathlib import Path

from pylog.log.durable import write_atomically
from pylog.protocol import ErrorCode

FILE = "pylog-client-quotas.json"
USER, CLIENT_ID, IP = "user", "client-id", "ip"
#: The user of every connection: pylog has no SASL (Kafka's principal for PLAINTEXT).
ANONYMOUS = "ANONYMOUS"

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
#: Kafka's QuotaConfigs: the keys of user and client-id entities, and their types.
LONG_KEYS = frozenset({PRODUCE, FETCH})
CLIENT_KEYS = LONG_KEYS | {REQUEST, "controller_mutation_rate"}
IP_KEYS = frozenset({"connection_creation_rate"})
ENFORCED = frozenset({PRODUCE, FETCH, REQUEST})

# Kafka's match types in a DescribeClientQuotas filter component.
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

# ClientQuotaManagerConfig.NanosToPercentagePerSecond: a request's time in ns
# recorded as percent-seconds, so the rate is a percentage of one thread.
NANOS_TO_PERCENT = 100.0 / 1e9
INT32_MAX = 2**31 - 1
# Sensors of clients idle this long are dropped (Kafka's
# InactiveSensorExpirationTimeSeconds); looked for at most once a minute.
SENSOR_EXPIRY_MS = 3_600_000
SWEEP_EVERY_MS = 60_000

Entity = tuple[tuple[str, "str | None"], ...]  # sorted (entity type, name or None = default)


class QuotaError(Exception):
    """An alteration or filter Kafka refuses, with its error code."""

    def __init__(self, message: str, code: int = ErrorCode.INVALID_REQUEST) -> None:
        super().__init__(message)
        self.code = code


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """A request's entity, checked as Kafka's ClientQuotaControlManager checks it."""
    seen: dict[str, str | None] = {}
    for entity_type, name in pairs:
        if entity_type in seen:
            raise QuotaError("Invalid empty client quota entity, duplicate entity entry "
                             f"{entity_type}")
        if entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaError(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise QuotaError(f"Empty {entity_type} not supported")
        seen[entity_type] = name
    if not seen:
        raise QuotaError("Invalid empty client quota entity")
    if IP in seen and len(seen) > 1:
        raise QuotaError("Invalid empty client quota entity")  # Kafka's words for a bad mix
    return tuple(sorted(seen.items()))


def _check_value(entity: Entity, key: str, value: float) -> None:
    is_ip = entity[0][0] == IP
    if key not in (IP_KEYS if is_ip else CLIENT_KEYS):
        raise QuotaError(f"Invalid configuration key {key}")
    if key not in ENFORCED:
        raise QuotaError(f"pylog does not enforce {key}: only {', '.join(sorted(ENFORCED))} "
                         "are applied, so it is not accepted")
    if key in LONG_KEYS and abs(math.floor(value + 1e-6) - value) > 1e-6:
        raise QuotaError(f"Configuration {key} must be a Long value")
    if not value > 0 or math.isinf(value):
        # Kafka takes these and then throttles nobody (a zero bound divides
        # to an infinite delay that overflows to -1); refused here instead.
        raise QuotaError(f"Quota {key} must be a positive number, not {value}")


class QuotaStore:
    """The configured quotas by entity, saved in ``<log.dir>/pylog-client-quotas.json``."""

    def __init__(self, log_dir: Path) -> None:
        self.path = Path(log_dir) / FILE
        self.quotas: dict[Entity, dict[str, float]] = {}
        self.generation = 0  # moves on with every change (the managers' caches)
        if self.path.exists():
            saved = json.loads(self.path.read_text())
            for item in saved["entities"]:
                entity = tuple(sorted((t, n) for t, n in item["entity"]))
                self.quotas[entity] = {k: float(v) for k, v in item["quotas"].items()}

    def _save(self) -> None:
        entities = [{"entity": [list(pair) for pair in entity], "quotas": values}
                    for entity, values in sorted(self.quotas.items(),
                                                 key=lambda kv: repr(kv[0]))]
        write_atomically(self.path, json.dumps({"version": 1, "entities": entities},
                                               indent=1).encode())

    def alter(self, entries: list[tuple[list[tuple[str, str | None]],
                                        list[tuple[str, float, bool]]]],
              validate_only: bool) -> list[tuple[int, str | None]]:
        """AlterClientQuotas: each entry's (error code, message), in order.  An
        entry is applied whole or not at all; the file is written once."""
        results: list[tuple[int, str | None]] = []
        changed = False
        seen: set[Entity] = set()
        for pairs, ops in entries:
            try:
                entity = _entity(pairs)
                if entity in seen:
                    raise QuotaError(f"Ignoring duplicate entity {_describe(entity)}")
                seen.add(entity)
                keys = [key for key, _, _ in ops]
                for key in keys:
                    if keys.count(key) > 1:
                        raise QuotaError(f"Duplicate quota key {key} not updating quota for "
                                         f"this entity {_describe(entity)}")
                for key, value, remove in ops:
                    if not remove:
                        _check_value(entity, key, value)
            except QuotaError as exc:
                results.append((exc.code, str(exc)))
                continue
            results.append((0, None))
            if validate_only:
                continue
            values = dict(self.quotas.get(entity, {}))
            for key, value, remove in ops:
                if remove:
                    values.pop(key, None)
                else:
                    values[key] = float(value)
            if values != self.quotas.get(entity, {}):
                changed = True
                if values:
                    self.quotas[entity] = values
                else:
                    self.quotas.pop(entity, None)
        if changed:
            self._save()
            self.generation += 1
        return results

    def describe(self, components: list[tuple[str, int, str | None]],
                 strict: bool) -> list[tuple[Entity, dict[str, float]]]:
        """DescribeClientQuotas: the entities the filter matches, with their quotas."""
        types = [c[0] for c in components]
        for entity_type in types:
            if types.count(entity_type) > 1:
                raise QuotaError(f"Duplicate {entity_type} filter component entity type")
            if entity_type not in (USER, CLIENT_ID, IP):
                raise QuotaError(f"Unhandled client quota entity type: {entity_type}")
        if IP in types and len(types) > 1:
            raise QuotaError("Invalid entity filter component combination, IP filter "
                             "component should not be used with user or clientId filter "
                             "component.")
        for entity_type, match_type, match in components:
            if match_type == MATCH_EXACT and match is None:
                raise QuotaError(f"Missing match for {entity_type} filter component")
            if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
                raise QuotaError(f"Unknown match type {match_type}")
        out = []
        for entity, values in self.quotas.items():
            names = dict(entity)
            if strict and set(names) != set(types):
                continue
            if all(_matches(names, c) for c in components):
                out.append((entity, dict(values)))
        return out

    def get(self, entity: Entity, key: str) -> float | None:
        values = self.quotas.get(entity)
        return None if values is None else values.get(key)

    def has_key(self, key: str) -> bool:
        return any(key in values for values in self.quotas.values())


def _matches(names: dict[str, str | None], component: tuple[str, int, str | None]) -> bool:
    entity_type, match_type, match = component
    if entity_type not in names:
        return False
    if match_type == MATCH_EXACT:
        return names[entity_type] == match
    if match_type == MATCH_DEFAULT:
        return names[entity_type] is None
    return True


def _describe(entity: Entity) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


# -- which quota applies -------------------------------------------------------------


def _key(user: str | None = "", client: str | None = "") -> Entity:
    """The store's key of a (user, client-id) level; "" leaves the type out."""
    pairs = []
    if client != "":
        pairs.append((CLIENT_ID, client))
    if user != "":
        pairs.append((USER, user))
    return tuple(pairs)


def resolve(store: QuotaStore, key: str, user: str,
            client_id: str) -> tuple[tuple[str, str], float | None]:
    """Kafka's DefaultQuotaCallback for one quota type: the metric tags (user,
    client id; "" where the quota is shared across that part) and the bound
    (None: unlimited)."""
    has = store.get
    if has(_key(user, client_id), key) is not None or has(_key(user, None), key) is not None:
        tags = (user, client_id)
    elif has(_key(user, ""), key) is not None:
        tags = (user, "")
    elif (has(_key(None, client_id), key) is not None
          or has(_key(None, None), key) is not None):
        tags = (user, client_id)
    elif has(_key(None, ""), key) is not None:
        tags = (user, "")
    else:
        tags = ("", client_id)
    tag_user, tag_client = tags
    bound = None
    if tag_user and tag_client:
        for level in (_key(tag_user, tag_client), _key(tag_user, None),
                      _key(None, tag_client), _key(None, None)):
            bound = has(level, key)
            if bound is not None:
                break
    elif tag_user:
        bound = has(_key(tag_user, ""), key)
        if bound is None:
            bound = has(_key(None, ""), key)
    elif tag_client:
        bound = has(_key("", tag_client), key)
        if bound is None:
            bound = has(_key("", None), key)
    return tags, bound


# -- rates ------------------------------------------------------------------------


class Rate:
    """Kafka's ``Rate`` over a ``SampledStat`` of ``samples`` windows of
    ``window_ms``: per second, the values recorded in the retained windows."""

    __slots__ = ("samples", "window_ms", "starts", "values", "current", "last_ms")

    def __init__(self, samples: int, window_ms: int, now: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self.starts = [now]
        self.values = [0.0]
        self.current = 0
        self.last_ms = now

    def record(self, value: float, now: int) -> None:
        self.last_ms = now
        if now - self.starts[self.current] >= self.window_ms:  # the sample is complete
            self.current = (self.current + 1) % self.samples
            if self.current >= len(self.starts):
                self.starts.append(now)
                self.values.append(0.0)
            else:
                self.starts[self.current] = now
                self.values[self.current] = 0.0
        self.values[self.current] += value

    def _purge(self, now: int) -> None:
        expire = self.samples * self.window_ms
        for i, start in enumerate(self.starts):
            if now - start >= expire:
                self.starts[i] = now
                self.values[i] = 0.0

    def window_size_ms(self, now: int) -> int:
        """Rate.windowSize: the span of the retained samples, at least
        ``samples - 1`` whole windows."""
        self._purge(now)
        elapsed = now - min(self.starts)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def measure(self, now: int) -> float:
        size = self.window_size_ms(now)
        return sum(self.values) / (size / 1000.0)


class QuotaManager:
    """One quota type's sensors (produce bytes, fetch bytes or request time)."""

    def __init__(self, store: QuotaStore, key: str, samples: int, window_s: int,
                 max_throttle_ms: int = INT32_MAX) -> None:
        self.store = store
        self.key = key
        self.samples = samples
        self.window_ms = window_s * 1000
        self.max_throttle_ms = max_throttle_ms
        self.rates: dict[tuple[str, str], Rate] = {}
        self._resolved: dict[tuple[str, str], tuple[tuple[str, str], float | None]] = {}
        self._generation = -1
        self._enabled = False
        self._last_sweep = now_ms()

    @property
    def enabled(self) -> bool:
        """Any quota of this type configured (else nothing is recorded)."""
        if self._generation != self.store.generation:
            self._resolved.clear()
            self._generation = self.store.generation
            self._enabled = self.store.has_key(self.key)
        return self._enabled

    def _lookup(self, user: str, client_id: str) -> tuple[tuple[str, str], float | None]:
        if not self.enabled:
            return ("", client_id), None
        pair = (user, client_id)
        found = self._resolved.get(pair)
        if found is None:
            found = self._resolved[pair] = resolve(self.store, self.key, user, client_id)
        return found

    def _rate(self, tags: tuple[str, str], now: int) -> Rate:
        rate = self.rates.get(tags)
        if rate is None:
            if now - self._last_sweep >= SWEEP_EVERY_MS:
                self._last_sweep = now
                for old in [t for t, r in self.rates.items()
                            if now - r.last_ms >= SENSOR_EXPIRY_MS]:
                    del self.rates[old]
            rate = self.rates[tags] = Rate(self.samples, self.window_ms, now)
        return rate

    def record(self, client_id: str | None, value: float, now: int | None = None,
               user: str = ANONYMOUS) -> int:
        """Record ``value`` for the client; the throttle time in ms (0: within quota)."""
        tags, bound = self._lookup(user, client_id or "")
        if bound is None:
            return 0
        now = now_ms() if now is None else now
        rate = self._rate(tags, now)
        rate.record(value, now)
        observed = rate.measure(now)
        if observed <= bound:
            return 0
        delay = (observed - bound) / bound * rate.window_size_ms(now)
        return max(min(round(delay), self.max_throttle_ms, INT32_MAX), 0)

    def unrecord(self, client_id: str | None, value: float, now: int | None = None,
                 user: str = ANONYMOUS) -> None:
        """Take back a value recorded (a throttled fetch sends no data)."""
        tags, bound = self._lookup(user, client_id or "")
        if bound is not None:
            now = now_ms() if now is None else now
            self._rate(tags, now).record(-value, now)

    def max_value_in_window(self, client_id: str | None, user: str = ANONYMOUS) -> float:
        """The most that one request may carry without certain throttling
        (getMaxValueInQuotaWindow): bound * (samples - 1) * window seconds."""
        _, bound = self._lookup(user, client_id or "")
        if bound is None:
            return math.inf
        return bound * (self.samples - 1) * self.window_ms / 1000


class ClientQuotas:
    """The node's quota store and its three managers (``broker.quotas``)."""

    def __init__(self, log_dir: Path, samples: int = 11, window_s: int = 1) -> None:
        self.store = QuotaStore(log_dir)
        self.produce = QuotaManager(self.store, PRODUCE, samples, window_s)
        self.fetch = QuotaManager(self.store, FETCH, samples, window_s)
        # ClientRequestQuotaManager: at most one window of throttle.
        self.request = QuotaManager(self.store, REQUEST, samples, window_s,
                                    max_throttle_ms=window_s * 1000)

    def record_request(self, client_id: str | None, started_ns: int) -> int:
        """The request quota for a request whose handling began at
        ``started_ns`` (time.perf_counter_ns): its throttle time in ms."""
        if not self.request.enabled:
            return 0
        spent = time.perf_counter_ns() - started_ns
        return self.request.record(client_id, spent * NANOS_TO_PERCENT)
