"""The broker node: configuration, request handlers (one module per API), startup.

``broker.Broker`` holds a node's state (logs, topics, producers) and
``requests.RequestRouter`` turns frames into handler calls; each ``<api>.py``
module declares ``API_KEY``, ``VERSIONS`` (the versions we implement and have
tested with real clients) and ``handle(broker, header, body)``.
"""
