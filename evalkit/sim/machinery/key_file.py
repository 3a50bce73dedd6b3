"""A test service account for `evalkit sim --google-key-file PATH`: the command-line way to sign in to the
simulated Vertex AI.

The simulator makes a fresh RSA key (never a real one), knows its public half (its token endpoint then
checks every assertion, and its Vertex routes want the tokens it issued), and writes the key file as
Google Cloud's console writes one, its `token_uri` at the simulator's own `/token`. Pointed at that file
by GOOGLE_APPLICATION_CREDENTIALS, evalkit (google-auth) signs in offline exactly as it does against Google.
The file is written once the server listens (its `token_uri` needs the port), readable by its owner only;
a file that is not one the simulator wrote is never overwritten (a real key may live at that path).
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.sim.machinery.accounts import ServiceAccount

SIM_DOMAIN = "evalkit-sim.iam.gserviceaccount.com"  # marks a key file the simulator wrote (and may replace)
SIM_PROJECT = "sim-project"


@dataclass(frozen=True)
class SimKeyFile:
    """A service account made for one simulator, and where its key file goes."""

    path: Path
    public: ServiceAccount
    private_pem: str = field(repr=False)

    def write(self, token_uri: str, project: str = SIM_PROJECT) -> Path:
        """The key file, its token_uri at the simulator (mode 0600; replaces only a file the simulator wrote);
        ValueError naming the flag when it cannot be written."""
        check_replaceable(self.path)
        text = json.dumps({
            "type": "service_account", "project_id": project, "private_key_id": self.public.key_id,
            "private_key": self.private_pem, "client_email": self.public.email,
            "client_id": "100000000000000000001", "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": token_uri, "universe_domain": "googleapis.com"}, indent=2)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        except OSError as e:
            raise ValueError(f"--google-key-file {self.path}: cannot be written ({e.strerror or e})") from None
        return self.path


def check_replaceable(path: Path) -> None:
    """ValueError when `path` exists and is not a key file the simulator wrote (a real key is never replaced)."""
    if not path.exists() and not path.is_symlink():
        return
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        info = None
    email = info.get("client_email") if isinstance(info, dict) else None
    if path.is_symlink() or not path.is_file() or not isinstance(email, str) or not email.endswith("@" + SIM_DOMAIN):
        raise ValueError(f"--google-key-file {path}: the file exists and is not a key file the simulator wrote "
                         "(it is never replaced: choose another path)")


def new_key_file(path: str | Path, name: str = "sim") -> SimKeyFile:
    """A service account with a fresh RSA key (2048 bits), to be written at `path` once the server listens;
    ValueError (naming the flag) when `path` holds another file."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    path = Path(path)
    check_replaceable(path)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    account = ServiceAccount(f"{name}@{SIM_DOMAIN}", secrets.token_hex(20), public)
    return SimKeyFile(path, account, private)
