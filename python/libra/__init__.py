"""libra from Python: the planner, the simulator, the C-MLFQ router and trace files.

A thin ctypes layer over liblibra.so (include/libra/libra.h; docs/python.md). Configs are the
experiment files of the command-line tool (docs/config.md) given as a dict, JSON text or a
path; results are the documents `libra plan --json` and `libra sim --json` print, parsed.

    >>> import libra
    >>> libra.plan({"cluster": {"gpus": 32}})["rollout"]["buckets_text"]
    'tp8x2:30000'
"""

import ctypes
import json
import math
import os
import sys
import threading
from typing import NamedTuple

from . import _lib
from ._lib import lib

__all__ = ["Error", "Decision", "Router", "plan", "sim", "prompt_key", "version", "trace"]

_CODES = {-1: "EINVAL", -2: "ENOENT", -3: "EIO", -4: "ENOMEM", -5: "EINFEAS", -6: "EINTERNAL"}
_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -1 << 63  # with _INT64_MAX, the integers libra's JSON reads (jansson's json_int_t)
# the most bytes a config file read whole may hold (API_MAX_FILE_BYTES, as the commands read)
_MAX_FILE_BYTES = 1 << 30


class Error(Exception):
    """A failure the library reported: code (a negative LIBRA_E* number), code_name
    ("EINVAL"), message, and where: file ("" when none), line and col (0 when unknown).
    str() reads "FILE:LINE:COL: MESSAGE" as the command-line tool prints it."""

    def __init__(self, code, message, file="", line=0, col=0):
        self.code = code
        self.code_name = _CODES.get(code, str(code))
        self.message = message
        self.file = file
        self.line = line
        self.col = col
        super().__init__(self.location() + message)

    def __reduce__(self):
        # pickle and copy rebuild it from these, not from args (the one string str() reads),
        # so that an Error crosses processes (multiprocessing, Ray) whole
        return (type(self), (self.code, self.message, self.file, self.line, self.col),
                self.__dict__)

    def location(self):
        """"FILE:LINE:COL: " (as much as is known), or ""."""
        if not self.file:
            return ""
        if self.line:
            return f"{self.file}:{self.line}:{self.col}: " if self.col else \
                f"{self.file}:{self.line}: "
        return f"{self.file}: "


def _text(raw):
    return raw.decode("utf-8", "replace")


def _raise(rc, err):
    # the file is a path: its bytes as the OS gives them back (os.fsencode reopens it)
    raise Error(rc, _text(err.msg), os.fsdecode(err.file), err.line, err.col)


def _check(rc, err):
    if rc < 0:
        _raise(rc, err)
    return rc


def _type_error(what, value, accepts):
    """The TypeError of an argument what given value, naming every kind it accepts (a tuple:
    ("str", "bytes", "None") reads "str, bytes or None"), so that the message is the argument's
    whole contract (docs/python.md), not the part of it one helper checks."""
    names = accepts[0] if len(accepts) == 1 else ", ".join(accepts[:-1]) + " or " + accepts[-1]
    return TypeError(f"{what}: expected {names}, not {type(value).__name__}")


_STR = ("str", "bytes")


def _surrogate(ch):
    """Why a str holding surrogate ch is refused."""
    return f"contains {ch!r}, a surrogate, which is no character"


def _bytes(what, value, accepts=_STR):
    """A C string from str or bytes (no NUL inside). A str is UTF-8, its surrogates U+DC80..
    U+DCFF the bytes 0x80..0xff they stand for (as os.fsdecode made them from a path or an
    argument the OS gave), other surrogates refused. accepts names what the argument takes,
    for the TypeError: a caller that takes more than str or bytes says what."""
    if isinstance(value, str):
        try:
            value = value.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as e:
            raise ValueError(f"{what}: {_surrogate(value[e.start])}") from None
    elif not isinstance(value, (bytes, bytearray)):
        raise _type_error(what, value, accepts)
    if b"\0" in value:
        raise ValueError(f"{what}: contains a NUL character")
    return bytes(value)


def _bytes_or_none(what, value):
    """_bytes, with None (not known) passed on as a NULL."""
    return None if value is None else _bytes(what, value, _STR + ("None",))


def _int_text(n):
    """int n in digits, or its size where the digits would be many more than a reader reads
    (past 128 bits; Python refuses to print one of 4300 digits)."""
    return str(n) if n.bit_length() <= 128 else f"an int of {n.bit_length()} bits"


def _out_of_range(n, lo, hi):
    """Why int n, outside lo..hi, is refused."""
    return f"expected {lo}..{hi}, not {_int_text(n)}"


def _int(what, value, lo, hi, accepts=("an int",)):
    """value, an int in lo..hi; accepts as for _bytes."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(what, value, accepts)
    if not lo <= value <= hi:
        raise ValueError(f"{what}: {_out_of_range(value, lo, hi)}")
    return value


def _tokens(what, value):
    """A token count from 0, or None (not known, or a failed turn) as the library's -1."""
    return -1 if value is None else _int(what, value, 0, _INT64_MAX, ("an int", "None"))


def _now(now_s):
    if now_s is None:
        return math.nan
    if isinstance(now_s, bool) or not isinstance(now_s, (int, float)):
        raise _type_error("now_s", now_s, ("a number", "None"))
    try:
        now = float(now_s)
    except OverflowError:  # an int past a double's range: the infinity the library refuses
        now = math.inf if now_s > 0 else -math.inf
    if math.isnan(now):  # the library's "no clock given": None says that
        raise ValueError("now_s: NaN is not a time (None reads the library's clock)")
    return now


_JSON_TYPES = (dict, list, tuple, str, int, float, bool, type(None))
_KEY_TYPES = (str, int, float, bool, type(None))


def _not_a_number(x):
    """Why float x, NaN or an infinity, is refused."""
    return f"{'NaN' if math.isnan(x) else repr(x)} is not a JSON number"


def _str_problem(s):
    """Why libra's JSON cannot hold str s (jansson refuses \\u0000 and a surrogate's escape,
    which json.dumps writes for a NUL and for a str that is not Unicode text), or None."""
    if "\0" in s:
        return "contains a NUL character"
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as e:
        return _surrogate(s[e.start])
    return None


def _key_problem(k, path):
    """(path, exception class, why) when dict key k has no JSON form libra reads (a type JSON
    keys cannot be, NaN or an infinity, a str _str_problem refuses), else None."""
    where = f"{path + ': ' if path else ''}key {k!r}"
    if not isinstance(k, _KEY_TYPES):
        return (where, TypeError,
                f"expected a str, int, float, bool or None, not {type(k).__name__}")
    if isinstance(k, float) and not math.isfinite(k):
        return (where, ValueError, _not_a_number(k))
    why = _str_problem(k) if isinstance(k, str) else None
    return (where, ValueError, why) if why else None


def _scalar_problem(value, path):
    """(path, exception class, why) when a value that is no list or dict has no JSON form
    libra reads (NaN or an infinity, an int past int64, a str _str_problem refuses, a type JSON
    has no form for), else None."""
    why = None
    if isinstance(value, float):
        why = None if math.isfinite(value) else _not_a_number(value)
    elif isinstance(value, int):
        why = None if _INT64_MIN <= value <= _INT64_MAX else \
            _out_of_range(value, _INT64_MIN, _INT64_MAX)
    elif isinstance(value, str):
        why = _str_problem(value)
    elif not isinstance(value, _JSON_TYPES):
        return (path, TypeError, "expected a dict, list, str, int, float, bool or None, not "
                + type(value).__name__)
    return (path, ValueError, why) if why else None


def _unencodable(value, path="", inside=()):
    """(path, exception class, why) of the first part of value libra's JSON cannot hold —
    what _scalar_problem and _key_problem refuse, a container that contains itself — its path
    as "rl.steps" or "turns[1].generated_tokens"; None when there is none."""
    if isinstance(value, dict):
        for k in value:
            found = _key_problem(k, path)
            if found:
                return found
        items = ((k if isinstance(k, str) else json.dumps(k), v) for k, v in value.items())
        items = ((f"{path}.{k}" if path else k, v) for k, v in items)
    elif isinstance(value, (list, tuple)):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return _scalar_problem(value, path)
    if any(value is outer for outer in inside):
        return (path, ValueError, "contains itself")
    for where, v in items:
        found = _unencodable(v, where, inside + (value,))
        if found:
            return found
    return None


def _dumps(what, value):
    """The JSON text (bytes) of value, checked first for what libra's JSON cannot hold, which
    the library would refuse at a column of text the caller never saw: ValueError (NaN, an
    infinity, an int past int64, a NUL or a surrogate in a str, a container inside itself,
    nesting past Python's recursion limit) or TypeError (a value or key of a type JSON has no
    form for), naming what and the field ("config: rl.steps: NaN is not a JSON number")."""
    try:
        found = _unencodable(value)
        if not found:
            return json.dumps(value, allow_nan=False).encode()
    except RecursionError:
        raise ValueError(f"{what}: nested deeper than {sys.getrecursionlimit()} levels, more "
                         "than can be encoded") from None
    where, exc, why = found
    raise exc(f"{what}: {where + ': ' if where else ''}{why}")


def _read_config(path):
    """The bytes of the config file at path: refused at its first NUL or past _MAX_FILE_BYTES,
    so that an endless stream (/dev/zero) is not read until memory runs out."""
    chunks, total = [], 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                return b"".join(chunks)
            if b"\0" in chunk:
                raise ValueError(f"config: {os.fsdecode(path)}: contains a NUL character")
            total += len(chunk)
            if total > _MAX_FILE_BYTES:
                raise ValueError(f"config: {os.fsdecode(path)}: larger than {_MAX_FILE_BYTES} "
                                 "bytes, the most a file read whole may hold")
            chunks.append(chunk)


def _config(config):
    """(JSON text, name) of a config: None (the built-in default), a dict, JSON text (str or
    bytes) or a path (os.PathLike), whose name then labels errors."""
    if config is None:
        return None, None
    if isinstance(config, dict):
        return _dumps("config", config), None
    if isinstance(config, os.PathLike):
        return _read_config(config), _bytes("config", os.fsencode(config))
    return _bytes("config", config,
                  ("a dict", "JSON text (str or bytes)", "an os.PathLike", "None")), None


def _document(fn, config):
    text, name = _config(config)
    out = ctypes.c_void_p()
    err = _lib.CError()
    rc = fn(text, name, ctypes.byref(out), ctypes.byref(err))
    try:
        doc = json.loads(ctypes.string_at(out.value)) if out.value else None
    finally:
        lib.libra_free(out)
    if rc == -5 and doc is not None:  # no feasible plan: a result, not an error
        return doc
    _check(rc, err)
    return doc


def version():
    """The library's version, e.g. "0.1.0"."""
    return lib.libra_version().decode()


def plan(config=None):
    """The plan of `libra plan CONFIG --json` as a dict (schema libra.plan/1). A plan that is
    not feasible is returned too: its "feasible" is false and "why" names the constraint."""
    return _document(lib.libra_plan, config)


def sim(config=None):
    """The result of `libra sim CONFIG --json` as a dict (schema libra.sim/1)."""
    return _document(lib.libra_sim, config)


def prompt_key(text):
    """The prompt key of a string, as `libra serve` derives it from "libra.prompt"."""
    data = _bytes("prompt", text)
    return lib.libra_prompt_key(data, len(data))


class Decision(NamedTuple):
    """Where a turn goes (include/libra/libra.h, struct libra_decision)."""
    instance: int       # the instance id to send the turn to
    bucket: int         # that instance's bucket
    policy_bucket: int  # the policy's bucket before capacity fallback; -1: bucket-agnostic
    from_bucket: int    # the policy's bucket before this decision; -1 on the first turn
    prev_instance: int  # the previous turn's instance; -1 on the first
    reason: str         # "first", "stay", "promote", "demote", ...
    place: str          # "sticky", "bucket", "fallback", "overflow"


class Router:
    """C-MLFQ in process: the calls `libra serve` makes on each event, for a framework that
    picks the engine of every turn itself. Register the engines with add_instance; then per
    trajectory start, route each turn (send it to decision.instance), turn_done when it
    answers, tool_return for each tool result, finish at the end; step after each training
    step. Safe to share between threads (calls are serialised)."""

    def __init__(self, config=None):
        text, name = _config(config)
        handle = ctypes.c_void_p()
        err = _lib.CError()
        _check(lib.libra_router_new(text, name, ctypes.byref(handle), ctypes.byref(err)), err)
        self._handle = handle
        self._lock = threading.Lock()

    def close(self):
        """Frees the router; later calls raise ValueError."""
        with self._lock:
            if self._handle:
                lib.libra_router_free(self._handle)
                self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) and lib is not None:  # None late in shutdown
            lib.libra_router_free(self._handle)

    def _call(self, fn, *args):
        err = _lib.CError()
        with self._lock:
            if not self._handle:
                raise ValueError("libra.Router: closed")
            return _check(fn(self._handle, *args, ctypes.byref(err)), err)

    @property
    def buckets(self):
        """The bucket layout routed over, e.g. "tp1:4000,tp2:12000,tp4:30000"."""
        with self._lock:
            if not self._handle:
                raise ValueError("libra.Router: closed")
            return lib.libra_router_buckets(self._handle).decode()

    def add_instance(self, instance, tp):
        """Registers an engine: its id (an int from 0) and TP size. Returns the bucket it
        serves."""
        bucket = ctypes.c_int()
        self._call(lib.libra_router_add_instance, _int("instance", instance, 0, _INT64_MAX),
                   _int("tp", tp, -2**31, 2**31 - 1), ctypes.byref(bucket))
        return bucket.value

    def start(self, trajectory, prompt):
        """A trajectory starts: its id (str or bytes), and its prompt's key (an int in
        0..2**63-1 shared by the samples of a group, or a str/bytes hashed by prompt_key)."""
        key = prompt_key(prompt) if isinstance(prompt, (str, bytes, bytearray)) else \
            _int("prompt", prompt, 0, _INT64_MAX, ("an int",) + _STR)
        self._call(lib.libra_router_start, _bytes("trajectory", trajectory), key)

    def tool_return(self, trajectory, tool, status=None, payload_tokens=None):
        """A tool return after the last turn: tool name (None: not known), status ("success",
        "failure", "timeout", "other"; None: not known) and size in tokens (None: not
        known)."""
        self._call(lib.libra_router_tool_return, _bytes("trajectory", trajectory),
                   _bytes_or_none("tool", tool), _bytes_or_none("status", status),
                   _tokens("payload_tokens", payload_tokens))

    def route(self, trajectory, context_tokens=None, now_s=None):
        """Routes the trajectory's next turn, whose request holds context_tokens (None: not
        known), at now_s seconds of a monotonic clock (None: the library's clock). Returns a
        Decision."""
        d = _lib.CDecision()
        self._call(lib.libra_router_route, _bytes("trajectory", trajectory),
                   _tokens("context_tokens", context_tokens), _now(now_s), ctypes.byref(d))
        return Decision(d.instance, d.bucket, d.policy_bucket, d.from_bucket, d.prev_instance,
                        d.reason.decode(), d.place.decode())

    def turn_done(self, trajectory, generated_tokens):
        """The turn in flight answered with generated_tokens; None says it failed, and the
        next route places it again."""
        self._call(lib.libra_router_turn_done, _bytes("trajectory", trajectory),
                   _tokens("generated_tokens", generated_tokens))

    def finish(self, trajectory, status="completed"):
        """The trajectory ended: "completed", "truncated", "aborted" or "filtered" (None:
        completed)."""
        self._call(lib.libra_router_finish, _bytes("trajectory", trajectory),
                   _bytes_or_none("status", status))

    def step(self, now_s=None):
        """A training step ended: learn the trajectories finished in it."""
        self._call(lib.libra_router_step, _now(now_s))


from . import trace  # noqa: E402  (it uses Error from here)
