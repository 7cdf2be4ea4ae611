"""Loading liblibra.so and declaring its functions (include/libra/libra.h) for ctypes.

ctypes rather than a C extension: installing needs no compiler and no Python headers, and the
one shared library the build makes serves every Python 3 version.

The library is the first of: $LIBRA_LIBRARY; liblibra.so inside this package; the prefix's
lib/liblibra.so when the package is installed by `cmake --install` (PREFIX/lib/python3/
dist-packages/libra); the build tree's build/{release,dev,asan}/liblibra.so when the package is
run from the source tree; ctypes.util.find_library("libra").
"""

import ctypes
import ctypes.util
import os
from pathlib import Path

_HERE = Path(__file__).resolve().parent
_NAME = "liblibra.so"


def _candidates():
    yield _HERE / _NAME
    yield _HERE.parents[2] / _NAME  # PREFIX/lib/python3/dist-packages/libra -> PREFIX/lib
    for build in ("release", "dev", "asan"):
        yield _HERE.parents[1] / "build" / build / _NAME  # the source tree's python/libra
    found = ctypes.util.find_library("libra")
    if found:
        yield Path(found)


def _load():
    env = os.environ.get("LIBRA_LIBRARY")
    if env:  # a path, a bare name one in the working directory (not the loader's to look for)
        path = Path(env).absolute()
        if not path.exists():
            raise ImportError(f"libra: LIBRA_LIBRARY: {env} does not exist")
        return ctypes.CDLL(str(path)), str(path)
    tried = []
    for path in _candidates():
        # a bare name from find_library is the loader's to resolve
        if path.parent == Path(".") or path.exists():
            return ctypes.CDLL(str(path)), str(path)
        tried.append(str(path))
    raise ImportError("libra: liblibra.so not found (set LIBRA_LIBRARY); tried "
                      + ", ".join(tried))


lib, path = _load()


class CError(ctypes.Structure):
    """struct libra_error."""
    _fields_ = [("file", ctypes.c_char * 256), ("line", ctypes.c_int), ("col", ctypes.c_int),
                ("msg", ctypes.c_char * 512)]


class CDecision(ctypes.Structure):
    """struct libra_decision."""
    _fields_ = [("instance", ctypes.c_int64), ("bucket", ctypes.c_int),
                ("policy_bucket", ctypes.c_int), ("from_bucket", ctypes.c_int),
                ("prev_instance", ctypes.c_int64), ("reason", ctypes.c_char_p),
                ("place", ctypes.c_char_p)]


_P = ctypes.c_void_p
_S = ctypes.c_char_p
_I = ctypes.c_int
_I64 = ctypes.c_int64
_U64 = ctypes.c_uint64
_D = ctypes.c_double
_E = ctypes.POINTER(CError)
_OUT = ctypes.POINTER(ctypes.c_void_p)

_SIGNATURES = {
    "libra_version": (_S, []),
    "libra_free": (None, [_P]),
    "libra_plan": (_I, [_S, _S, _OUT, _E]),
    "libra_sim": (_I, [_S, _S, _OUT, _E]),
    "libra_router_new": (_I, [_S, _S, _OUT, _E]),
    "libra_router_free": (None, [_P]),
    "libra_router_buckets": (_S, [_P]),
    "libra_router_add_instance": (_I, [_P, _I64, _I, ctypes.POINTER(_I), _E]),
    "libra_router_start": (_I, [_P, _S, _U64, _E]),
    "libra_router_tool_return": (_I, [_P, _S, _S, _S, _I64, _E]),
    "libra_router_route": (_I, [_P, _S, _I64, _D, ctypes.POINTER(CDecision), _E]),
    "libra_router_turn_done": (_I, [_P, _S, _I64, _E]),
    "libra_router_finish": (_I, [_P, _S, _S, _E]),
    "libra_router_step": (_I, [_P, _D, _E]),
    "libra_prompt_key": (_U64, [_S, ctypes.c_size_t]),
    "libra_trace_reader_open": (_I, [_S, _OUT, ctypes.POINTER(_S), _E]),
    "libra_trace_reader_next": (_I, [_P, ctypes.POINTER(_S), _E]),
    "libra_trace_reader_close": (None, [_P]),
    "libra_trace_writer_open": (_I, [_S, _S, _OUT, _E]),
    "libra_trace_writer_put": (_I, [_P, _S, _E]),
    "libra_trace_writer_close": (_I, [_P, _E]),
    "libra_trace_writer_abort": (None, [_P]),
}

for _name, (_restype, _argtypes) in _SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _restype
    _fn.argtypes = _argtypes
