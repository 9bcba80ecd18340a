"""Encryption at rest of stored credentials (kubeconfigs, GitOps repository tokens).

Fernet (AES-128-CBC + HMAC-SHA256, from `cryptography`) behind MultiFernet: the
first configured key encrypts, every configured key decrypts, so a key is rotated
by putting a new one first, re-sealing what is stored (`broker clusters
rotate-secrets`) and then dropping the old one.

Without a key nothing is sealed: storing a credential is refused (NotConfigured)
rather than generating a key file beside the database. A generated key would sit
in the same data directory as the SQLite file it protects, and an API and a worker
on two machines would each make their own and fail to read each other's rows.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from broker.errors import BrokerError, NotConfigured
from broker.settings import Settings

NO_KEY = (
    "this server has no BROKER_SECRET_KEY, so it cannot store cluster credentials; "
    "ask the operator to configure one (docs/operations.md, 'Secret key')"
)
UNREADABLE = "a stored credential cannot be decrypted with the configured keys (was its key removed?)"


class SecretUnreadable(BrokerError):
    """A sealed value none of the configured keys opens (key removed too early, or the row was altered)."""

    title = "Stored credential unreadable"


class SecretBox:
    """Seals and opens strings. A missing or malformed key fails only the calls that need one."""

    def __init__(self, keys: list[str], *, problem: str = "") -> None:
        self._fernet: MultiFernet | None = None
        self._problem = problem or NO_KEY
        if keys and not problem:
            try:
                self._fernet = MultiFernet([Fernet(k.encode()) for k in keys])
            except ValueError:  # the message names no key material
                self._problem = "BROKER_SECRET_KEY is not a list of Fernet keys (32 url-safe base64 bytes each)"

    @classmethod
    def from_settings(cls, settings: Settings) -> SecretBox:
        try:
            return cls(settings.secret_keys())
        except OSError as exc:
            return cls([], problem=f"BROKER_SECRET_KEY_FILE cannot be read ({type(exc).__name__})")

    @property
    def configured(self) -> bool:
        return self._fernet is not None

    def _box(self) -> MultiFernet:
        if self._fernet is None:
            raise NotConfigured(self._problem)
        return self._fernet

    def seal(self, plaintext: str) -> str:
        return self._box().encrypt(plaintext.encode()).decode()

    def open(self, token: str) -> str:
        try:
            return self._box().decrypt(token.encode()).decode()
        except InvalidToken as exc:
            raise SecretUnreadable(UNREADABLE) from exc

    def rotate(self, token: str) -> str:
        """The same plaintext sealed with the first (newest) key."""
        try:
            return self._box().rotate(token.encode()).decode()
        except InvalidToken as exc:
            raise SecretUnreadable(UNREADABLE) from exc

    @staticmethod
    def generate_key() -> str:
        return Fernet.generate_key().decode()
