"""Third-party SDKs imported when first needed: one line for one that is missing or that fails to import.

An SDK that is installed but broken or of an incompatible version (a half-finished upgrade, a package
that imports something its own release removed) raises anything while it is imported, not only
ImportError: AttributeError, TypeError, SyntaxError. That was a traceback; now it is one line naming
the package, its installed version and the fix, exit 2 (EvalkitError).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from evalkit.core.errors import EvalkitError


@dataclass(frozen=True)
class Sdk:
    """A package evalkit imports lazily: its distribution name and the extra that installs it (None: a
    dependency of evalkit itself)."""

    distribution: str
    extra: str | None

    def fix(self, upgrade: bool) -> str:
        what = f"'evalkit[{self.extra}]'" if self.extra else self.distribution
        return f"pip install {'-U ' if upgrade else ''}{what}"


# by top-level import name ("google.genai" is its own: "google" is a namespace other packages share)
SDKS: dict[str, Sdk] = {
    "openai": Sdk("openai", None),
    "anthropic": Sdk("anthropic", "anthropic"),
    "google.genai": Sdk("google-genai", "google"),
    "huggingface_hub": Sdk("huggingface_hub", None),
    "redis": Sdk("redis", "redis"),
    "azure.identity": Sdk("azure-identity", "azure-entra"),
    "google.auth": Sdk("google-auth", "vertex"),
    "botocore": Sdk("botocore", "bedrock"),  # bedrock/: SigV4 signing and the AWS credential chain
    "boto3": Sdk("boto3", "bedrock"),  # bedrock/ Claude: the anthropic SDK's Bedrock client signs through it
    "mlflow": Sdk("mlflow-skinny", "mlflow"),  # `mlflow` itself installs mlflow-skinny too
    "wandb": Sdk("wandb", "wandb"),
}


class SdkMissing(EvalkitError):
    """The SDK is not installed at all (a caller may say more about the choice it has)."""


def _home(module: str) -> tuple[str, Sdk]:
    """The SDKS entry a module belongs to ("redis.asyncio" -> "redis")."""
    for name, sdk in SDKS.items():
        if module == name or module.startswith(name + "."):
            return name, sdk
    raise KeyError(f"{module} is not a known SDK")


def installed_version(distribution: str) -> str:
    import importlib.metadata  # only once something failed

    try:
        return importlib.metadata.version(distribution)
    except Exception:  # not installed as a distribution (a folder on sys.path), or broken metadata
        return "version unknown"


def _present(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except Exception:  # a parent package that fails to import
        return True


def import_sdk(module: str, needed_by: str) -> ModuleType:
    """`module` imported, or EvalkitError: "`needed_by` needs X, which is not installed: pip install …" or
    "… X 1.2.3 is installed but fails to import (AttributeError: …): pip install -U …"."""
    name, sdk = _home(module)
    try:
        return importlib.import_module(module)
    except Exception as e:
        missing = isinstance(e, ModuleNotFoundError) and e.name is not None and (
            name == e.name or name.startswith(e.name + "."))
        if missing or not _present(name):
            raise SdkMissing(f"{needed_by} needs {sdk.distribution}, which is not installed: "
                               f"{sdk.fix(upgrade=False)}") from None
        detail = " ".join(str(e).split())[:200]
        raise EvalkitError(f"{needed_by} needs {sdk.distribution}, but the installed {sdk.distribution} "
                           f"({installed_version(sdk.distribution)}) fails to import ({type(e).__name__}"
                           f"{': ' + detail if detail else ''}); reinstall or upgrade it: "
                           f"{sdk.fix(upgrade=True)}") from None


def load_target(target: str) -> Any:
    """What a "module:attribute" string names, its module imported now: provider records and the
    command table name their code this way, so nothing is imported before it is used."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)
