"""Trace files (docs/trace-format.md) read and written through libra's own reader and writer,
so that what Python reads was checked as `libra trace validate` checks it and what it writes
is accepted by every command.

    with libra.trace.read("run.jsonl") as r:
        print(r.header["workload"])
        for record in r:
            ...
    libra.trace.write("out.jsonl", header, records)
"""

import ctypes
import json
import os

from . import _bytes, _check, _dumps, _lib
from ._lib import lib

__all__ = ["Reader", "read", "write"]


def _path(path):
    """A C string of a path: str, bytes or os.PathLike, without a NUL (which would end it
    early, naming another file)."""
    return _bytes("path", os.fsencode(path) if isinstance(path, os.PathLike) else path,
                  ("str", "bytes", "an os.PathLike"))


def _json(what, value):
    """The JSON text of a header or record: a dict, or JSON text as it is."""
    if isinstance(value, dict):
        return _dumps(what, value)
    return _bytes(what, value, ("a dict", "JSON text (str or bytes)"))


class Reader:
    """The records of a trace, one dict per trajectory, in file order. header is line 1 as a
    dict. A bad line raises Error (FILE:LINE:COL: FIELD: REASON); iterating on reads the line
    after it. Close it (or use it as a context manager) to release the file; reading it then
    raises ValueError, as a closed file does (header stays)."""

    def __init__(self, path):
        handle = ctypes.c_void_p()
        header = ctypes.c_char_p()
        err = _lib.CError()
        _check(lib.libra_trace_reader_open(_path(path), ctypes.byref(handle),
                                           ctypes.byref(header), ctypes.byref(err)), err)
        self._handle = handle
        self.header = json.loads(header.value)

    def __iter__(self):
        return self

    def __next__(self):
        if not self._handle:  # not the end: a half-read trace must not pass for a short one
            raise ValueError("libra.trace.Reader: closed")
        record = ctypes.c_char_p()
        err = _lib.CError()
        if _check(lib.libra_trace_reader_next(self._handle, ctypes.byref(record),
                                              ctypes.byref(err)), err) == 0:
            raise StopIteration
        return json.loads(record.value)

    def close(self):
        """Releases the file; later reads raise ValueError."""
        if self._handle:
            lib.libra_trace_reader_close(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None):
            lib.libra_trace_reader_close(self._handle)


def read(path):
    """A Reader over the trace at path ("-": standard input)."""
    return Reader(path)


def write(path, header, records):
    """Writes a trace: header (a dict, or JSON text) and the records (dicts or JSON texts) of
    an iterable. The file appears whole at path only once every record was written; a bad
    record raises Error (PATH:LINE:COL, the line it would have taken) and leaves nothing.
    Returns the number of records written."""
    handle = ctypes.c_void_p()
    err = _lib.CError()
    _check(lib.libra_trace_writer_open(_path(path), _json("header", header), ctypes.byref(handle),
                                       ctypes.byref(err)), err)
    n = 0
    try:
        for record in records:
            _check(lib.libra_trace_writer_put(handle, _json("record", record), ctypes.byref(err)),
                   err)
            n += 1
    except BaseException:
        lib.libra_trace_writer_abort(handle)
        raise
    _check(lib.libra_trace_writer_close(handle, ctypes.byref(err)), err)
    return n

