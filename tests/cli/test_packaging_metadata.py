"""What a plain `pip install evalkit` brings, read from the metadata the build backend writes for the wheel.

A plain install serves a key of every provider on the card that has one of its own: the anthropic and
google-genai SDKs are dependencies, not extras (they are still imported only when used: test_light_start).
The extras `anthropic` and `google` stay, empty, so `pip install "evalkit[anthropic]"` keeps working, and
`all` holds every optional extra's packages.
"""

from __future__ import annotations

import os
import subprocess
import sys
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import evalkit

REPO = Path(evalkit.__file__).resolve().parents[1]
OPTIONAL = ("bedrock", "vertex", "azure-entra", "redis", "mlflow", "wandb")  # what `.[all]` must hold
NOT_OPTIONAL = ("all", "dev")

# the backend's PEP 517 hook, run in the source tree: the METADATA a wheel built from it would carry
_METADATA = """
import sys
from hatchling.build import prepare_metadata_for_build_wheel
print(prepare_metadata_for_build_wheel(sys.argv[1]))
"""


@pytest.fixture(scope="module")
def metadata(tmp_path_factory) -> dict[str, list[str]]:
    out = tmp_path_factory.mktemp("metadata")
    proc = subprocess.run([sys.executable, "-c", _METADATA, str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 0, proc.stderr
    text = (out / proc.stdout.strip().splitlines()[-1] / "METADATA").read_text(encoding="utf-8")
    message = Parser().parsestr(text)
    return {"Requires-Dist": message.get_all("Requires-Dist") or [],
            "Provides-Extra": message.get_all("Provides-Extra") or []}


def _requirements(metadata: dict[str, list[str]], extra: str | None) -> list[Requirement]:
    """The requirements a plain install (`extra` None) or `evalkit[extra]` adds."""
    found = []
    for line in metadata["Requires-Dist"]:
        req = Requirement(line)
        if extra is None:
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                found.append(req)
        elif req.marker is not None and req.marker.evaluate({"extra": extra}) \
                and not req.marker.evaluate({"extra": ""}):
            found.append(req)
    return found


def _names(reqs: list[Requirement]) -> set[str]:
    return {r.name.lower().replace("_", "-") for r in reqs}


def _pairs(reqs: list[Requirement]) -> set[tuple[str, str]]:
    """(package, extra) pairs: `anthropic[bedrock]` is ("anthropic", "bedrock") and ("anthropic", "")."""
    pairs = set()
    for r in reqs:
        name = r.name.lower().replace("_", "-")
        pairs.add((name, ""))
        pairs.update((name, e) for e in r.extras)
    return pairs


def test_a_plain_install_brings_the_anthropic_and_google_sdks(metadata) -> None:
    plain = _names(_requirements(metadata, None))
    assert {"anthropic", "google-genai", "openai"} <= plain, sorted(plain)


def test_the_anthropic_and_google_extras_stay_and_add_nothing(metadata) -> None:
    assert {"anthropic", "google"} <= set(metadata["Provides-Extra"])
    assert _requirements(metadata, "anthropic") == []
    assert _requirements(metadata, "google") == []


def test_all_holds_every_optional_extra(metadata) -> None:
    extras = set(metadata["Provides-Extra"])
    assert set(OPTIONAL) <= extras, sorted(extras)
    everything = _pairs(_requirements(metadata, "all")) | _pairs(_requirements(metadata, None))
    for extra in sorted(extras - set(NOT_OPTIONAL)):
        missing = _pairs(_requirements(metadata, extra)) - everything
        assert not missing, f"evalkit[all] lacks evalkit[{extra}]'s {sorted(missing)}"
