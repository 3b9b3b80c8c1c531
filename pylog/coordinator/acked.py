"""A coordinator's answer now, or once its write is in the in-sync replicas.

A coordinator changes its state and answers only once what it wrote to its
internal topic is replicated (Kafka's acks=-1 appends for
``__consumer_offsets`` and ``__transaction_state``, completed by their
callbacks).  On a single node, or with an ISR of this node alone, that is at
once: the coordinators then answer as plain calls, with no future, no task
and no wait.  Only a write that has followers to wait for gives a future,
and what follows it runs when that future is done: :func:`then` chains the
steps either way, so each coordinator has one code path for both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")
U = TypeVar("U")


def then(value: T | asyncio.Future[T], step: Callable[[T], U | asyncio.Future[U]]
         ) -> U | asyncio.Future[U]:
    """``step(value)`` now when ``value`` is no future; else a future of it,
    run once ``value`` is done (a ``step`` that gives a future in turn is
    waited for too).  The steps run on the event loop, never on the
    client's connection: one that went away does not stop them."""
    if not isinstance(value, asyncio.Future):
        return step(value)
    out: asyncio.Future[U] = value.get_loop().create_future()

    def done(fut: asyncio.Future[T]) -> None:
        # The step runs even when nobody waits for ``out`` any more: it is
        # the coordinator's own state change.
        try:
            result = step(fut.result())
        except BaseException as exc:  # the caller's future carries it
            if not out.done():
                out.set_exception(exc)
            return
        if isinstance(result, asyncio.Future):
            result.add_done_callback(lambda r: _copy(r, out))
        elif not out.done():
            out.set_result(result)

    value.add_done_callback(done)
    return out


def after(first: asyncio.Future | None, value: T | asyncio.Future[T]
          ) -> T | asyncio.Future[T]:
    """``value``, held back until ``first`` (an earlier write's last step)
    is done too, however it ended: writes appended in one order take effect
    in that order, whichever of their waits ends first."""
    if first is None or first.done():
        return value
    out: asyncio.Future[T] = first.get_loop().create_future()
    if not isinstance(value, asyncio.Future):
        first.add_done_callback(lambda _: out.done() or out.set_result(value))
        return out

    def done(_: asyncio.Future) -> None:
        if first.done() and value.done():
            _copy(value, out)

    first.add_done_callback(done)
    value.add_done_callback(done)
    return out


def _copy(source: asyncio.Future, target: asyncio.Future) -> None:
    if target.done():
        return
    if source.cancelled():
        target.cancel()
    elif source.exception() is not None:
        target.set_exception(source.exception())  # type: ignore[arg-type]
    else:
        target.set_result(source.result())


def answer(value: T | asyncio.Future[T], build: Callable[[T], dict[str, Any]]
           ) -> dict[str, Any] | Awaitable[dict[str, Any]]:
    """A request handler's response: ``build(value)`` now, or an awaitable of
    it once ``value`` (a coordinator's future) is done."""
    if not isinstance(value, asyncio.Future):
        return build(value)
    return _built(value, build)


async def _built(value: asyncio.Future[T], build: Callable[[T], dict[str, Any]]
                 ) -> dict[str, Any]:
    # shield: a connection closed before the answer leaves the write's own
    # completion (the coordinator's state change) alone.
    return build(await asyncio.shield(value))
