"""Incremental fetch sessions (KIP-227), as Kafka's ``FetchSession.scala``.

A consumer of many partitions would otherwise name every one of them in every
Fetch, and get every one back, data or not.  With a session the broker keeps
the partition list: the client sends only what changed since its last fetch
(new fetch offsets, added partitions, ``forgotten_topics_data``), and the
response holds only partitions with something to say -- records, a new high
watermark or log start offset, or an error.  kafka-python and the Java client
use sessions from Fetch v7; librdkafka does not (it sends session id 0,
epoch -1: a sessionless fetch, unchanged).

The request's (session id, epoch) picks the context, as ``FetchManager.newContext``:

* epoch -1 (FINAL): sessionless; a named session is closed first;
* epoch 0 (INITIAL): a full fetch that opens a new session (closing a named
  one); the session is made when the response is (``maybe_create``), if the
  cache has a slot or can evict one, else the response carries session id 0;
* any other epoch: incremental, on a session that must exist
  (FETCH_SESSION_ID_NOT_FOUND) at exactly that epoch (INVALID_FETCH_SESSION_EPOCH).

The cache holds ``max.incremental.fetch.session.cache.slots`` sessions; a full
cache evicts a session unused for two minutes, else the smallest session older
than two minutes if the new one is larger (``FetchSessionCache.tryEvict``).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from pylog.protocol import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_MS = 120_000  # Kafka's fixed FetchSessionCache eviction time
_INT32_MAX = 2**31 - 1

# A request partition as the Fetch codec decodes it:
# (partition, fetch offset, partition max bytes, current leader epoch).
Topics = list[tuple[str, list[tuple[int, int, int, int]]]]


def next_epoch(epoch: int) -> int:
    """``FetchMetadata.nextEpoch``: the epoch the client sends next."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT32_MAX else epoch + 1


class CachedPartition:
    """A partition of a session: the client's last fetch parameters and what
    the last response told it (``FetchSession.CachedPartition``)."""

    __slots__ = ("fetch", "high_watermark", "log_start_offset")

    def __init__(self, fetch: tuple[int, int, int, int]) -> None:
        self.fetch = fetch
        self.high_watermark = -1
        self.log_start_offset = -1

    def must_respond(self, error_code: int, high_watermark: int, log_start_offset: int,
                     has_records: bool) -> bool:
        """``maybeUpdateResponseData``: whether the partition goes in an
        incremental response, remembering what it tells the client.  After an
        error the remembered high watermark is -1, so the partition is sent
        again once the error is gone."""
        respond = has_records
        if self.high_watermark != high_watermark:
            respond = True
            self.high_watermark = high_watermark
        if self.log_start_offset != log_start_offset:
            respond = True
            self.log_start_offset = log_start_offset
        if error_code:
            self.high_watermark = -1
            respond = True
        return respond


class FetchSession:
    __slots__ = ("id", "epoch", "partitions", "created_ms", "last_used_ms")

    def __init__(self, session_id: int, partitions: dict[tuple[str, int], CachedPartition],
                 now_ms: int) -> None:
        self.id = session_id
        self.epoch = next_epoch(INITIAL_EPOCH)
        # Insertion order is the read order: partitions that returned records
        # move to the end, so the next fetch's byte budget goes to the others first.
        self.partitions = partitions
        self.created_ms = now_ms
        self.last_used_ms = now_ms

    def update(self, topics: Topics, forgotten: list[tuple[str, list[int]]]) -> None:
        """Apply an incremental request: new or changed partitions, then removals."""
        parts = self.partitions
        for topic, partitions in topics:
            for fetch in partitions:
                cached = parts.get((topic, fetch[0]))
                if cached is None:
                    parts[(topic, fetch[0])] = CachedPartition(fetch)
                else:
                    cached.fetch = fetch
        for topic, indexes in forgotten:
            for index in indexes:
                parts.pop((topic, index), None)

    def topics(self) -> Topics:
        """Every partition of the session, for the read, grouped as a response
        groups them: consecutive partitions of one topic."""
        out: Topics = []
        last = None
        for (topic, _), cached in self.partitions.items():
            if topic != last:
                out.append((topic, []))
                last = topic
            out[-1][1].append(cached.fetch)
        return out


class FetchContext:
    """What one Fetch request does with sessions, decided when it arrives;
    :meth:`FetchSessionCache.respond` finishes it when the response is made."""

    __slots__ = ("error", "session", "full", "expected_epoch")

    def __init__(self, error: int = 0, session: FetchSession | None = None,
                 full: bool = False) -> None:
        self.error = error  # a session error: the whole response is that error
        self.session = session  # incremental: the session read and answered
        self.full = full  # a full fetch that opens a session with its response
        self.expected_epoch = session.epoch if session is not None else 0


SESSIONLESS = FetchContext()


class FetchSessionCache:
    def __init__(self, max_slots: int, clock_ms: Callable[[], int],
                 eviction_ms: int = EVICTION_MS) -> None:
        self.max_slots = max_slots
        self.clock_ms = clock_ms
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def partitions_cached(self) -> int:
        return sum(len(s.partitions) for s in self.sessions.values())

    def context(self, session_id: int, epoch: int, topics: Topics,
                forgotten: list[tuple[str, list[int]]]) -> FetchContext:
        """``FetchManager.newContext`` for a Fetch v7+ request."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.sessions.pop(session_id, None)  # a full fetch closes it
            return SESSIONLESS if epoch == FINAL_EPOCH else FetchContext(full=True)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        session.update(topics, forgotten)
        if not session.partitions:
            del self.sessions[session_id]
            return SESSIONLESS
        session.last_used_ms = self.clock_ms()
        session.epoch = next_epoch(epoch)
        return FetchContext(session=session)

    def respond(self, context: FetchContext, request: Topics,
                answered: list) -> tuple[int, int, list]:
        """(error code, session id, topics) of the response to a fetch of
        ``request``'s partitions, whose answers are ``answered`` (the Fetch
        codec's response tuples, in the request's order)."""
        if context.error:
            return context.error, INVALID_SESSION_ID, []
        session = context.session
        if session is not None:
            return self._incremental(context, session, answered)
        if context.full:
            return 0, self.maybe_create(request, answered), answered
        return 0, INVALID_SESSION_ID, answered

    def _incremental(self, context: FetchContext, session: FetchSession,
                     topics: list) -> tuple[int, int, list]:
        if session.epoch != context.expected_epoch:
            # Another request moved the session on while this one waited.
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, []
        parts = session.partitions
        out: list = []
        moved = []
        for topic, answers in topics:
            kept = []
            for answer in answers:
                key = (topic, answer[0])
                cached = parts.get(key)
                if cached is None:
                    continue
                has_records = len(answer[6]) > 0
                if cached.must_respond(answer[1], answer[2], answer[4], has_records):
                    kept.append(answer)
                    if has_records:
                        moved.append(key)
            if kept:
                if out and out[-1][0] == topic:
                    out[-1][1].extend(kept)
                else:
                    out.append((topic, kept))
        for key in moved:  # round robin: those that got records go last
            parts[key] = parts.pop(key)
        return 0, session.id, out

    def maybe_create(self, request: Topics, answered: list) -> int:
        """A new session for a full fetch: the request's partitions, with what
        their answers (``answered``, in the same order) told the client.  Its
        id, or 0 when the cache is full and nothing may be evicted for it."""
        if self.max_slots <= 0:
            return INVALID_SESSION_ID
        now = self.clock_ms()
        size = sum(len(partitions) for _, partitions in request)
        if len(self.sessions) >= self.max_slots and not self._evict(size, now):
            return INVALID_SESSION_ID
        parts: dict[tuple[str, int], CachedPartition] = {}
        for (topic, partitions), (_, answers) in zip(request, answered, strict=True):
            for fetch, answer in zip(partitions, answers, strict=True):
                cached = CachedPartition(fetch)
                cached.high_watermark = -1 if answer[1] else answer[2]
                cached.log_start_offset = answer[4]
                parts[(topic, fetch[0])] = cached
        session_id = self._new_id()
        self.sessions[session_id] = FetchSession(session_id, parts, now)
        return session_id

    def _evict(self, size: int, now: int) -> bool:
        """``tryEvict`` for a consumer's session of ``size`` partitions."""
        oldest = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        if now - oldest.last_used_ms > self.eviction_ms:
            victim = oldest
        else:
            old = [s for s in self.sessions.values() if now - s.created_ms > self.eviction_ms]
            if not old:
                return False
            victim = min(old, key=lambda s: (len(s.partitions), s.id))
            if size <= len(victim.partitions):
                return False
        del self.sessions[victim.id]
        self.evictions += 1
        return True

    def _new_id(self) -> int:
        while True:
            session_id = random.randint(1, _INT32_MAX)
            if session_id not in self.sessions:
                return session_id
