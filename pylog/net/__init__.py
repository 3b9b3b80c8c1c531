"""Listener, connections and framing of a node, on asyncio.

``framing`` splits int32-size-prefixed frames (into writable buffers the socket
fills directly) and holds the ``FileRegion`` placeholder for sendfile;
``connection`` answers pipelined requests in order and sends record bytes from
segment files with sendfile; ``listener`` accepts clients.  TLS/SASL come later.
"""
