"""A light start: help, version and list load none of the heavy libraries.

`evalkit --help`, `evalkit run --help`, `evalkit run BENCH --help` (every registered benchmark),
`evalkit --version` and `evalkit list` must answer at about the cost of importing rich, so none
of them may import scipy, numpy, matplotlib, PIL, pandas, aiohttp or a provider SDK. Each command
runs in a fresh interpreter (the modules a test process already holds would hide an import),
which then reports which of those top-level modules it has loaded. The same holds for importing
the library's own modules: heavy libraries are imported inside the functions that use them.
(bench/startup.py times the commands.)
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from evalkit.benchmarks import list_benchmarks

FORBIDDEN = ("scipy", "numpy", "matplotlib", "PIL", "pandas", "aiohttp", "openai", "anthropic", "google",
             "diskcache", "huggingface_hub", "httpx", "mlflow", "wandb", "botocore", "boto3")

# Runs a command through evalkit.cli.main in a fresh interpreter, then prints the forbidden
# top-level modules it has loaded as the last line of stdout.
_COMMAND_PROBE = """
import json, sys
import evalkit.cli
try:
    code = evalkit.cli.main(json.loads(sys.argv[1]))
except SystemExit as e:
    code = e.code
loaded = {name.partition(".")[0] for name in sys.modules}
print("\\nLOADED " + json.dumps({"code": code, "heavy": sorted(loaded & set(json.loads(sys.argv[2])))}))
"""

# Imports every module of the light packages, then prints the forbidden modules loaded.
_MODULE_PROBE = """
import importlib, json, pkgutil, sys
light = json.loads(sys.argv[1])
exempt = set(json.loads(sys.argv[2]))
for package in light:
    pkg = importlib.import_module(package)
    for info in pkgutil.walk_packages(getattr(pkg, "__path__", []), package + "."):
        if info.name not in exempt:
            importlib.import_module(info.name)
loaded = {name.partition(".")[0] for name in sys.modules}
print("LOADED " + json.dumps(sorted(loaded & set(json.loads(sys.argv[3])))))
"""

# Packages whose modules must import light, and the modules heavy by nature among them.
LIGHT_PACKAGES = ("evalkit.cli", "evalkit.benchmarks", "evalkit.core", "evalkit.grading", "evalkit.protocols",
                  "evalkit.metrics", "evalkit.rundir", "evalkit.multi", "evalkit.engine", "evalkit.images", "evalkit.money",
                  "evalkit.report", "evalkit.data", "evalkit.export")
HEAVY_BY_NATURE = ("evalkit.core.fingerprint",  # a PIL thumbnail; the image pipeline imports it on use
                   "evalkit.cli.demo")  # starts the simulated server (aiohttp); loaded only by `evalkit demo`

COMMANDS = [["--help"], ["--version"], ["list"], ["run", "--help"], ["data", "--help"], ["data", "list"],
            ["export", "--help"], ["plan", "--help"], ["plan", "mcq", "--help"],
            *(["run", name, "--help"] for name in list_benchmarks())]


def _loaded(probe: str, *args: str) -> object:
    proc = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.rstrip().rpartition("\n")[2]
    assert last.startswith("LOADED "), proc.stdout + proc.stderr
    return json.loads(last.removeprefix("LOADED "))


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_command_imports_no_heavy_library(argv: list[str]) -> None:
    result = _loaded(_COMMAND_PROBE, json.dumps(argv), json.dumps(FORBIDDEN))
    assert result["code"] in (0, None), f"evalkit {' '.join(argv)} exited with {result['code']}"
    assert result["heavy"] == [], f"evalkit {' '.join(argv)} imported {', '.join(result['heavy'])}"


def test_library_modules_import_no_heavy_library() -> None:
    heavy = _loaded(_MODULE_PROBE, json.dumps(LIGHT_PACKAGES), json.dumps(HEAVY_BY_NATURE), json.dumps(FORBIDDEN))
    assert heavy == [], f"importing evalkit's modules loaded {', '.join(heavy)} (import them where they are used)"
