"""Listener, connections, framing and the event loop of a node.

Filled by the broker issue; the package exists so the layout of DESIGN.md
section 4 holds from the start.
"""
