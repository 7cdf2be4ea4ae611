#!/usr/bin/env python3
"""Layering check: every #include under src/ must respect DESIGN.md's may-include table.

Usage: layering.py SRC_DIR
       layering.py --fixture DIR

Rules (the table below mirrors DESIGN.md "Layers" exactly; change both together):

* A file's module is its directory directly under SRC_DIR (src/plan/x.c -> plan). A file
  directly in SRC_DIR, or a module directory missing from the table, is an error: a new module
  is added to the table on purpose, not by accident.
* #include "a/b.h" includes module a. A module may include its own headers, the modules the
  table lists for it, and the public header "libra/libra.h". A quoted include without a
  directory ("x.h") names a header of the including module.
* <...> system includes are free, except in the pure modules (cost, engine, workload, plan,
  sched, ehp, job, report), which DESIGN.md keeps free of syscalls, clocks, threads, sockets
  and I/O (report/ turns results into text in memory; the CLI reads and writes the files). There
  the headers that exist only for those (time.h, unistd.h, pthread.h, signal.h, fcntl.h,
  dirent.h, threads.h, sys/*, event2/*) are rejected. <stdio.h> stays allowed for
  snprintf, so the calls that do I/O or read the environment or a clock (fopen, printf,
  getenv, time, rand, jansson's file loaders, ...) are rejected by name instead, outside
  comments and string literals.

Prints one line per violation ("src/util/x.c:12: util may not include spec (spec/preset.h)")
and exits 1; otherwise prints a one-line summary and exits 0. Exit 2 on a usage error.

--fixture DIR shows that the check can fail: DIR is a fake src tree whose offending lines carry
"layering-expect: TEXT". It exits 0 only when the violations reported are exactly the marked
lines, each message containing its TEXT; so a rule that stops firing, or fires where it should
not, fails the test.
"""

import os
import re
import sys

MAY_INCLUDE = {
    "util": set(),
    "spec": {"util"},
    "trace": {"util"},
    "net": {"util"},
    "cost": {"spec", "util"},
    "workload": {"spec", "util", "trace"},
    "engine": {"cost", "spec", "util"},
    "plan": {"cost", "spec", "util"},
    "sched": {"cost", "spec", "util"},
    "job": {"cost", "spec", "util"},
    "ehp": {"plan", "cost", "spec", "util"},
    "sim": {"engine", "plan", "sched", "ehp", "job", "workload", "trace", "cost", "spec", "util"},
    "report": {"sim", "util"},
    "server": {"net", "plan", "sched", "ehp", "job", "trace", "cost", "spec", "util"},
    "emu": {"net", "engine", "cost", "spec", "util"},
    "load": {"net", "job", "workload", "trace", "cost", "spec", "util"},
    # the public API (include/libra/libra.h) and what it shares with the commands
    "api": {"server", "emu", "load", "net", "sim", "report", "plan", "sched", "ehp", "job",
            "engine", "cost", "workload", "trace", "spec", "util"},
    "cli": None,  # anything
}

PURE = {"cost", "engine", "workload", "plan", "sched", "ehp", "job", "report"}
PUBLIC_HEADER = "libra/libra.h"

PURE_BANNED_HEADERS = re.compile(
    r"^(time\.h|unistd\.h|pthread\.h|signal\.h|fcntl\.h|dirent\.h|threads\.h"
    r"|sys/.*|event2/.*)$"
)
PURE_BANNED_CALLS = re.compile(
    r"(?<![\w.>])("
    r"fopen|freopen|fdopen|fclose|fread|fwrite|fgets|fputs|fputc|puts|putchar|getchar"
    r"|printf|fprintf|vprintf|vfprintf|perror|open|close|read|write"
    r"|getenv|setenv|system|exit|_Exit"
    r"|time|clock|clock_gettime|gettimeofday|sleep|usleep|nanosleep"
    r"|rand|srand|random|srandom|drand48"
    r"|json_load_file|json_loadf|json_loadfd|json_dump_file|json_dumpf|json_dumpfd"
    r")\s*\("
)

EXPECT = re.compile(r"layering-expect: (.*?)\s*(?:\*/|$)")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
# Comments and string/char literals, replaced by blanks (newlines kept) before the call scan.
NOISE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def blank(m):
    return re.sub(r"[^\n]", " ", m.group(0))


def check_file(path, rel, module, out):
    """Appends violations of one file to out; returns the number of includes seen."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    allowed = MAY_INCLUDE[module]
    n = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        n += 1
        kind, target = m.groups()
        where = f"{rel}:{lineno}"
        if kind == "<":
            if module in PURE and PURE_BANNED_HEADERS.match(target):
                out.append(f"{where}: pure module {module} may not include <{target}>")
            continue
        if target == PUBLIC_HEADER or "/" not in target or allowed is None:
            continue
        dep = target.split("/", 1)[0]
        if dep == module:
            continue
        if dep not in MAY_INCLUDE:
            out.append(f"{where}: {module} includes {target} from unknown module {dep}")
        elif dep not in allowed:
            out.append(f"{where}: {module} may not include {dep} ({target})")
    if module in PURE:
        code = NOISE.sub(blank, text)
        for m in PURE_BANNED_CALLS.finditer(code):
            lineno = code.count("\n", 0, m.start()) + 1
            out.append(f"{rel}:{lineno}: pure module {module} may not call {m.group(1)}()")
    return n


def scan(src):
    """Returns (violations, files, includes) for the tree under src."""
    label = os.path.basename(src)
    violations, files, includes = [], 0, 0
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.join(label, os.path.relpath(path, src))
            parts = os.path.relpath(path, src).split(os.sep)
            if len(parts) < 2:
                violations.append(f"{rel}:1: file is not inside a module directory")
            elif parts[0] not in MAY_INCLUDE:
                violations.append(
                    f"{rel}:1: unknown module {parts[0]} (add it to DESIGN.md's table "
                    f"and tests/lint/layering.py)"
                )
            else:
                files += 1
                includes += check_file(path, rel, parts[0], violations)
    return violations, files, includes


def expected(src):
    """Returns {"label/rel:line": TEXT} for every layering-expect marker under src."""
    label = os.path.basename(src)
    marks = {}
    for dirpath, _, filenames in os.walk(src):
        for name in filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.join(label, os.path.relpath(path, src))
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    m = EXPECT.search(line)
                    if m:
                        marks[f"{rel}:{lineno}"] = m.group(1)
    return marks


def verify_fixture(src):
    violations, _, _ = scan(src)
    marks = expected(src)
    bad = 0
    for v in violations:
        where = v.split(": ", 1)[0]
        text = marks.pop(where, None)
        if text is not None and text in v:
            print(f"rejected as expected: {v}")
        else:
            print(f"unexpected: {v}" + (f" (expected '{text}')" if text else ""))
            bad += 1
    for where, text in sorted(marks.items()):
        print(f"missed: {where}: expected a violation '{text}'")
        bad += 1
    if not marks and not violations:
        print("no layering-expect markers in the fixture")
        bad += 1
    return 1 if bad else 0


def main(argv):
    if len(argv) == 3 and argv[1] == "--fixture" and os.path.isdir(argv[2]):
        return verify_fixture(os.path.normpath(argv[2]))
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: layering.py SRC_DIR | layering.py --fixture DIR", file=sys.stderr)
        return 2
    violations, files, includes = scan(os.path.normpath(argv[1]))
    for v in violations:
        print(v)
    if violations:
        print(f"layering: {len(violations)} violation(s)")
        return 1
    print(f"layering: {files} files, {includes} includes, no violations")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
