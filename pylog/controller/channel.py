"""The controller's requests to the brokers (Kafka's ControllerChannelManager).

One ordered queue and one sender per live broker: LeaderAndIsr,
UpdateMetadata and StopReplica go out in the order the controller made them,
each retried (after ``retry_backoff_s``) until the broker answers or leaves
the cluster, as Kafka's RequestSendThread does.  A response goes to the
callback given with the request (topic deletion waits for its StopReplicas).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from pylog.net.client import BrokerClient, BrokerUnavailable
from pylog.protocol import ApiKey

log = logging.getLogger(__name__)

Callback = Callable[[int, Any], None]  # (broker id, response)

# Versions this controller sends: the ZooKeeper-mode ones Kafka 3.6 sends.
VERSIONS = {ApiKey.LEADER_AND_ISR: 6, ApiKey.UPDATE_METADATA: 7, ApiKey.STOP_REPLICA: 3}


class _Sender:
    def __init__(self, broker_id: int, host: str, port: int, client: BrokerClient,
                 retry_backoff_s: float) -> None:
        self.broker_id = broker_id
        self.queue: asyncio.Queue[tuple[int, Any, Callback | None]] = asyncio.Queue()
        self.connection = client.connection(broker_id, host, port)
        self.retry_backoff_s = retry_backoff_s
        self.task = asyncio.get_running_loop().create_task(self._run(),
                                                           name=f"controller-to-{broker_id}")

    async def _run(self) -> None:
        while True:
            api_key, body, callback = await self.queue.get()
            while True:
                try:
                    version = min(VERSIONS[api_key],
                                  (await self._versions()).get(api_key, (0, 0))[1])
                    response = await self.connection.request(api_key, body, version=version)
                    break
                except BrokerUnavailable as exc:
                    log.info("controller request %s to broker %d failed (%s); retrying",
                             ApiKey(api_key).name, self.broker_id, exc)
                    await asyncio.sleep(self.retry_backoff_s)
            if callback is not None:
                try:
                    callback(self.broker_id, response)
                except Exception:
                    log.exception("controller callback for %s failed", ApiKey(api_key).name)

    async def _versions(self) -> dict[int, tuple[int, int]]:
        await self.connection.ensure_connected()
        return self.connection.versions


class ControllerChannel:
    def __init__(self, client_id: str, request_timeout_s: float = 30.0,
                 retry_backoff_s: float = 0.1) -> None:
        self.client = BrokerClient(client_id, request_timeout_s=request_timeout_s)
        self.retry_backoff_s = retry_backoff_s
        self._senders: dict[int, _Sender] = {}

    def add_broker(self, broker_id: int, host: str, port: int) -> None:
        found = self._senders.get(broker_id)
        if found is not None:
            if (found.connection.host, found.connection.port) == (host, port):
                return
            self.remove_broker(broker_id)
        self._senders[broker_id] = _Sender(broker_id, host, port, self.client,
                                           self.retry_backoff_s)

    def remove_broker(self, broker_id: int) -> None:
        """A broker left: what was queued for it is dropped (a returning
        broker gets its whole state again)."""
        found = self._senders.pop(broker_id, None)
        if found is not None:
            found.task.cancel()
            self.client.forget(broker_id)

    def brokers(self) -> set[int]:
        return set(self._senders)

    def send(self, broker_id: int, api_key: int, body: Any,
             callback: Callback | None = None) -> bool:
        """Queue a request for ``broker_id``; False if it is not a live broker."""
        found = self._senders.get(broker_id)
        if found is None:
            return False
        found.queue.put_nowait((int(api_key), body, callback))
        return True

    def close(self) -> None:
        for broker_id in list(self._senders):
            self.remove_broker(broker_id)
        self.client.close()
