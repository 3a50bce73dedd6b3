"""A fake Google service account for tests: a fresh RSA key made here (never a real key), its key file
pointing its token_uri at a simulated server, and the public half that server checks assertions with."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from evalkit.sim.machinery.accounts import ServiceAccount


@dataclass(frozen=True)
class FakeAccount:
    """A service account's key file contents and the public side the simulator is given."""

    email: str
    key_id: str
    private_pem: str
    public: ServiceAccount

    def key_file(self, path: Path, token_uri: str, project: str = "sim-project") -> Path:
        """The key file as Google Cloud's console writes one, its token_uri at the simulator."""
        path.write_text(json.dumps({
            "type": "service_account", "project_id": project, "private_key_id": self.key_id,
            "private_key": self.private_pem, "client_email": self.email, "client_id": "100000000000000000001",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": token_uri,
            "universe_domain": "googleapis.com"}))
        return path


def fake_account(name: str = "evalkit-test", allowed: bool = True) -> FakeAccount:
    """A service account with a fresh RSA key (1024 bits: a test key, made fast; google-auth signs with any size)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    email = f"{name}@sim-project.iam.gserviceaccount.com"
    key_id = secrets.token_hex(20)
    return FakeAccount(email, key_id, private, ServiceAccount(email, key_id, public, allowed))
