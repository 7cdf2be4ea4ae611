"""The simulator's output is a fixed function of its inputs: the runs of
tests/data/golden/cases.txt must print exactly what the committed .out files hold.

The files were written by the tree before the simulator was made faster (slot reuse, sorted
tree windows, parallel tuning); a change that alters the model must regenerate them and say
why in its commit, and any other change must leave every byte as it is. Only libra_version
is ignored, so that a release does not rewrite the files.
"""

import os
import re
import shlex
import subprocess

import pytest

LIBRA = os.environ["LIBRA_BIN"]
SOURCE_DIR = os.environ["LIBRA_SOURCE_DIR"]
GOLDEN = os.path.join(SOURCE_DIR, "tests", "data", "golden")
VERSION = re.compile(r'"libra_version": ?"[^"]*"')


def cases():
    with open(os.path.join(GOLDEN, "cases.txt"), encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name, *args = shlex.split(line)
                yield pytest.param(name, args, id=name)


def unversioned(text):
    return VERSION.sub('"libra_version": ""', text)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("name,args", cases())
def test_output_is_unchanged(name, args, tmp_path):
    perfetto = str(tmp_path / "perfetto.json")
    args = [perfetto if a.endswith("perfetto.json") else a for a in args]
    p = subprocess.run([LIBRA, "sim", *args], cwd=SOURCE_DIR, capture_output=True, text=True,
                       timeout=280)
    assert p.returncode == 0, p.stderr
    assert unversioned(p.stdout) == unversioned(read(os.path.join(GOLDEN, name + ".out")))
    if "--perfetto" in args:
        assert unversioned(read(perfetto)) == unversioned(read(os.path.join(GOLDEN,
                                                                            "perfetto.json")))
