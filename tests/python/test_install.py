"""`cmake --install` of this build makes a Python package that works from any directory with
Debian's python3 and nothing but PYTHONPATH (docs/python.md, "Install").

Needs LIBRA_CMAKE, LIBRA_BINARY_DIR and LIBRA_BIN (set by tests/CMakeLists.txt).
"""

import json
import os
import subprocess

import cli


def test_installed_package_finds_its_library(tmp_path):
    prefix = tmp_path / "prefix"
    r = subprocess.run([os.environ["LIBRA_CMAKE"], "--install", os.environ["LIBRA_BINARY_DIR"],
                        "--prefix", str(prefix)], capture_output=True, text=True, timeout=120,
                       env=cli.env())
    assert r.returncode == 0, r.stderr
    assert (prefix / "include" / "libra" / "libra.h").is_file()
    package = prefix / "lib" / "python3" / "dist-packages" / "libra"
    assert sorted(p.name for p in package.iterdir()) == ["__init__.py", "_lib.py", "trace.py"]
    env = {k: v for k, v in os.environ.items() if k not in ("LIBRA_LIBRARY", "PYTHONPATH")}
    env["PYTHONPATH"] = str(prefix / "lib" / "python3" / "dist-packages")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = ("import json, libra; print(libra._lib.path); "
            "print(json.dumps(libra.plan({'cluster': {'gpus': 16}})))")
    r = subprocess.run(["/usr/bin/python3", "-c", code], cwd=elsewhere, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    path, doc = r.stdout.split("\n", 1)
    assert path == str(prefix / "lib" / "liblibra.so")
    assert json.loads(doc) == json.loads(cli.run("plan", "--json", "--gpus", "16").stdout)
