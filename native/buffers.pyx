"""Buffers for the network layer that Python cannot make cheaply."""

from cpython.bytearray cimport PyByteArray_FromStringAndSize


def alloc_frame(Py_ssize_t size) -> bytearray:
    """A bytearray of ``size`` bytes left uninitialised, for a receive buffer
    the socket fills completely before anything reads it (``bytearray(size)``
    zero-fills it first: a wasted pass over every large produce request)."""
    if size < 0:
        raise ValueError("negative size")
    return PyByteArray_FromStringAndSize(NULL, size)
