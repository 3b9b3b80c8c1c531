"""File I/O for the log: pwritev/fdatasync/sendfile, mmap, flushing, io_uring.

Filled by the storage issue; the package exists so the layout of DESIGN.md
section 4 holds from the start.
"""
