"""Compiled extensions built from ``native/`` (see setup.py)."""
