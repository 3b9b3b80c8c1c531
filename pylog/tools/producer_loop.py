"""The send loop shared by ``pylog producer-perf-test`` and spark_bench's producer tasks.

A plain module (no Spark, no argparse, nothing at import time beyond the standard library) so
Spark Python workers can import it as well as the command-line tool.

Two modes:

* ``rate > 0``: an open-loop schedule. Record ``i`` is *intended* at ``start_ns + i * 1e9/rate``
  and carries ``on_delivery=partial(on_scheduled, intended_ns)``, so its latency can be measured
  from when it should have been sent (a stalled client or broker shows up as latency instead of
  silently lowering the offered load: coordinated omission). Every record is timed.
* ``rate == 0`` (as fast as possible): one record in ``sample_every`` carries ``on_sample``
  (``(err, msg)``; ``msg.latency()`` is librdkafka's own produce()-to-ack time, which *is* the
  latency when the intended time is the produce() call); the others carry no callback. A Python
  callback on every record roughly halves what one client process can send. Acknowledged
  records are counted as sent minus still queued minus failed.

``tick(now_ns, sent)`` is called whenever the monotonic clock passes the deadline it returned
last time (first at ``next_tick_ns``): reports, warm-up bookkeeping, folding latencies.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

# Unthrottled runs take a latency sample (a delivery callback) on one record in this many.
SAMPLE_EVERY = 16
# poll(0) (serve delivery callbacks) about every this many records when unthrottled.
POLL_EVERY = 1024

Tick = Callable[[int, int], int]


def send_loop(
    producer: Any,
    topic: str,
    payloads: Sequence[bytes],
    *,
    start_ns: int,
    total: int | None = None,
    stop_ns: int | None = None,
    rate: float = 0.0,
    on_sample: Callable[[Any, Any], None] | None = None,
    on_scheduled: Callable[[int, Any, Any], None] | None = None,
    sample_every: int = SAMPLE_EVERY,
    poll_every: int = POLL_EVERY,
    tick: Tick | None = None,
    next_tick_ns: int | None = None,
) -> int:
    """Send until ``total`` records were handed to the client or the clock (the intended time
    with a rate) reaches ``stop_ns``; returns the number handed to the client. Payloads are
    cycled through. The caller flushes."""
    produce, poll = producer.produce, producer.poll
    mono = time.monotonic_ns
    npay = len(payloads)
    limit = sys.maxsize if total is None else total
    stop = sys.maxsize if stop_ns is None else stop_ns
    if tick is None:
        next_tick = sys.maxsize
    else:
        next_tick = start_ns if next_tick_ns is None else next_tick_ns
    i = 0
    if rate and rate > 0:
        if on_scheduled is None:
            raise ValueError("a rate needs on_scheduled")
        interval = 1e9 / rate
        partial = functools.partial
        sleep = time.sleep
        while i < limit:
            intended = start_ns + int(i * interval)
            if intended >= stop:
                break
            wait = intended - mono()
            # Serve callbacks while waiting; poll() has ms resolution, so a sub-millisecond
            # wait ends with sleep.
            while wait > 0:
                if wait > 2_000_000:
                    poll((wait - 1_000_000) / 1e9)
                else:
                    sleep(wait / 1e9)
                wait = intended - mono()
            try:
                produce(topic, payloads[i % npay], on_delivery=partial(on_scheduled, intended))
            except BufferError:  # queue full: the client or the broker is the limit
                poll(0.001)
                continue
            i += 1
            poll(0)
            if tick is not None:
                now = mono()
                if now >= next_tick:
                    next_tick = tick(now, i)
        return i

    every = max(1, sample_every)
    while i < limit:
        now = mono()
        if now >= stop:
            break
        if now >= next_tick:
            next_tick = tick(now, i)  # type: ignore[misc]
        # One sampled record, then up to every-1 without a callback.
        try:
            produce(topic, payloads[i % npay], on_delivery=on_sample)
        except BufferError:
            poll(0.001)
            continue
        i += 1
        end = min(i + every - 1, limit)
        while i < end:
            try:
                produce(topic, payloads[i % npay])
            except BufferError:
                poll(0.001)
                continue
            i += 1
        if i % poll_every < every:
            poll(0)
    return i
