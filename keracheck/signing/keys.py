"""Ed25519 signing keys: generate, load, identify.

``keygen(out_dir)`` writes ``keracheck.key`` (PKCS#8 PEM, mode 0600, encrypted with the password
held in the environment variable named by ``password_env`` when given) and ``keracheck.pub``
(SubjectPublicKeyInfo PEM).  The key id is the lowercase hex SHA-256 of the public key's SPKI
DER bytes.  ``load_private_key`` also takes ``env://VAR``: the PEM itself held in an
environment variable (a CI secret).  Every key problem raises :class:`KeyFileError` naming the
file and what is wrong.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

KEY_FILE = "keracheck.key"
PUB_FILE = "keracheck.pub"
PASSWORD_ENV = "KERACHECK_KEY_PASSWORD"
ENV_KEY_PREFIX = "env://"


class KeyFileError(Exception):
    """A key file (or ``env://`` key) is missing, unreadable, of the wrong kind or locked."""

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        super().__init__(f"{os.fspath(path)}: {problem}")
        self.path = os.fspath(path)
        self.problem = problem


def keyid(public_key: Ed25519PublicKey) -> str:
    """Lowercase hex SHA-256 of the key's SubjectPublicKeyInfo DER bytes."""
    der = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(der).hexdigest()


def _password(path: str | os.PathLike[str], password_env: str | None) -> bytes | None:
    if password_env is None:
        return None
    value = os.environ.get(password_env)
    if not value:
        raise KeyFileError(path, f"password variable {password_env} is not set or empty")
    return value.encode()


def _write_new(path: Path, data: bytes, mode: int) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = os.open(path, flags, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
    finally:
        os.close(fd)


def keygen(
    out_dir: str | os.PathLike[str], password_env: str | None = None, *, force: bool = False
) -> tuple[Path, Path]:
    """Write a new Ed25519 key pair into ``out_dir``; returns (private key path, public path)."""
    out = Path(out_dir)
    key_path, pub_path = out / KEY_FILE, out / PUB_FILE
    password = _password(key_path, password_env)
    encryption: serialization.KeySerializationEncryption = serialization.NoEncryption()
    if password is not None:
        encryption = serialization.BestAvailableEncryption(password)
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    for path in (key_path, pub_path):
        if path.exists() and not force:
            raise KeyFileError(path, "already exists; refusing to overwrite a key (delete it)")
    out.mkdir(parents=True, exist_ok=True)
    _write_new(key_path, private_pem, stat.S_IRUSR | stat.S_IWUSR)
    _write_new(pub_path, public_pem, 0o644)
    return key_path, pub_path


def _read_key_bytes(path: str | os.PathLike[str]) -> bytes:
    text = os.fspath(path)
    if text.startswith(ENV_KEY_PREFIX):
        value = os.environ.get(text[len(ENV_KEY_PREFIX) :])
        if not value:
            raise KeyFileError(path, "environment variable is not set or empty")
        return value.encode()
    try:
        return Path(text).read_bytes()
    except FileNotFoundError:
        raise KeyFileError(path, "no such file") from None
    except OSError as exc:
        raise KeyFileError(path, f"cannot read: {exc.strerror}") from None


def _locked_problem(message: str, password_env: str | None) -> str:
    if "not encrypted" in message:
        return f"the key is not encrypted, but a password was given in {password_env}"
    return (
        "the key is encrypted: put its password in an environment variable and name it "
        f"(e.g. {PASSWORD_ENV})"
    )


def load_private_key(
    path: str | os.PathLike[str], password_env: str | None = None
) -> Ed25519PrivateKey:
    """Load a PKCS#8 PEM Ed25519 private key from a file or ``env://VAR``."""
    data = _read_key_bytes(path)
    password = _password(path, password_env)
    try:
        key = serialization.load_pem_private_key(data, password)
    except TypeError as exc:
        raise KeyFileError(path, _locked_problem(str(exc), password_env)) from None
    except (ValueError, UnsupportedAlgorithm):
        problem = "not a PEM private key" if password is None else "wrong password or not a key"
        raise KeyFileError(path, problem) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(path, f"not an Ed25519 key ({type(key).__name__})")
    return key


def load_signing_key(source: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """The CLI's ``--key``: a file or ``env://VAR``, unlocked by $KERACHECK_KEY_PASSWORD if set.
    Reading it needs the ``key`` capability (``keracheck.security``); its use is audited."""
    from keracheck import security

    security.check_key(os.fspath(source))
    key = load_private_key(source, PASSWORD_ENV if os.environ.get(PASSWORD_ENV) else None)
    security.note("key", {"source": os.fspath(source), "keyid": keyid(key.public_key())})
    return key


def load_public_key(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    """Load an SPKI PEM Ed25519 public key (``keracheck.pub``)."""
    data = _read_key_bytes(path)
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm):
        raise KeyFileError(path, "not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(path, f"not an Ed25519 public key ({type(key).__name__})")
    return key
