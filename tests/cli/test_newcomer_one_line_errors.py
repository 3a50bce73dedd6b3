"""Two tracebacks a newcomer met are one line now, exit 2 (issue 35 item 10).

(a) `evalkit sim` on a port in use: the bind failure (and a port out of range, a host that cannot be
    bound) says so in one line, as `evalkit view --serve` does.
(b) An SDK that is installed but fails to import (broken, or of an incompatible version: anything it
    raises while imported, not only ImportError): one line naming the package, its installed version
    and the fix. Every lazy import of openai, anthropic, google-genai, huggingface_hub, redis and
    azure-identity goes through evalkit.core.sdk.import_sdk.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from synthetic_data import REPO

from evalkit.cli import main
from evalkit.core.errors import EvalkitError
from evalkit.core.sdk import SdkMissing, import_sdk, installed_version


def test_sim_on_a_busy_port_is_one_line(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["sim", "--port", str(port)]) == 2
    assert main(["sim", "--port", "70000"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"evalkit: error: cannot serve on 127.0.0.1:{port}: the port is in use (another server listens "
                   "there: stop it, or choose another --port)", "evalkit: error: --port must be 0..65535, got 70000"]


def _broken(root: Path, package: str, distribution: str, version: str, body: str) -> None:
    """A package that fails when imported, with the dist-info an installed release has."""
    where = root.joinpath(*package.split("."))
    where.mkdir(parents=True)
    (where / "__init__.py").write_text(body + "\n", encoding="utf-8")
    info = root / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n",
                                   encoding="utf-8")


CHILD = textwrap.dedent("""
    import sys
    from evalkit.core.errors import EvalkitError
    from evalkit.core.sdk import import_sdk
    from evalkit.providers.anthropic.client import AnthropicProvider
    from evalkit.providers.base import ProviderSpec
    from evalkit.cli import main
    for module in ("google.genai", "huggingface_hub", "redis.asyncio"):
        try:
            import_sdk(module, "--thing")
        except EvalkitError as e:
            print(e)
    try:
        AnthropicProvider(ProviderSpec("anthropic", "claude-x"), api_key="k")
    except EvalkitError as e:
        print(e)
    print("cache:", main(["cache", "stats", "--cache-url", "redis://127.0.0.1:9/0"]))
""")


def test_an_sdk_that_fails_to_import_is_one_line(tmp_path):
    fake = tmp_path / "site"
    _broken(fake, "anthropic", "anthropic", "0.0.1", "raise AttributeError(\"module 'httpx' has no attribute 'X'\")")
    _broken(fake, "google.genai", "google-genai", "0.0.2", "from json import no_such_name")
    _broken(fake, "huggingface_hub", "huggingface_hub", "0.0.3", "import no_such_dependency_of_the_hub")
    _broken(fake, "redis", "redis", "0.0.4", "raise TypeError('unsupported operand')")
    env = {**os.environ, "PYTHONPATH": f"{fake}{os.pathsep}{REPO}"}
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "--thing needs google-genai, but the installed google-genai (0.0.2) fails to import (ImportError: cannot "
        f"import name 'no_such_name' from 'json' ({Path(sys.modules['json'].__file__)})); reinstall or upgrade "
        "it: pip install -U 'evalkit[google]'",
        "--thing needs huggingface_hub, but the installed huggingface_hub (0.0.3) fails to import "
        "(ModuleNotFoundError: No module named 'no_such_dependency_of_the_hub'); reinstall or upgrade it: "
        "pip install -U huggingface_hub",
        "--thing needs redis, but the installed redis (0.0.4) fails to import (TypeError: unsupported operand); "
        "reinstall or upgrade it: pip install -U 'evalkit[redis]'",
        "anthropic/claude-x needs anthropic, but the installed anthropic (0.0.1) fails to import (AttributeError: "
        "module 'httpx' has no attribute 'X'); reinstall or upgrade it: pip install -U 'evalkit[anthropic]'",
        "cache: 2",
    ]
    assert done.stderr.splitlines() == [
        "evalkit: error: --cache-url needs redis, but the installed redis (0.0.4) fails to import (TypeError: "
        "unsupported operand); reinstall or upgrade it: pip install -U 'evalkit[redis]'"]


def test_a_missing_sdk_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "anthropic", None)  # what Python does for a package that is not there
    with pytest.raises(SdkMissing) as missing:
        import_sdk("anthropic", "anthropic/claude-x")
    assert str(missing.value) == ("anthropic/claude-x needs anthropic, which is not installed: "
                                  "pip install 'evalkit[anthropic]'")
    assert isinstance(missing.value, EvalkitError) and installed_version("no-such-distribution") == "version unknown"
