"""A content-addressed cache of per-service work, which is only ever a cache.

An entry's name is the digest of everything its content depends on (see keys.py), so an
entry is never invalidated, only no longer asked for. Entries are written atomically
(temporary file, then rename).

The folder is untrusted: a CI cache may be restored from another branch's pipeline, and
anyone who can write the repository's folder can write it. So every entry carries an
HMAC-SHA256 of its kind, its key and its bytes, keyed by a secret of the user running
obs-iac (``$OBS_IAC_CACHE_SECRET``, else ``$XDG_CONFIG_HOME/obs-iac/cache-secret``,
created on first use with mode 0600, outside every repository). Nothing read from the
folder is unpickled or run unless its tag verifies: a forged, corrupted or foreign entry
is a miss, never output and never code. Without a usable secret there is no cache.
Deleting the whole folder is always safe: the next render recomputes.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import time
from pathlib import Path

CACHE_DIR_ENV = "OBS_IAC_CACHE_DIR"
SECRET_ENV = "OBS_IAC_CACHE_SECRET"
DEFAULT_DIR = ".obs-iac-cache"
SECRET_FILE = "cache-secret"
# Entries older than this are pruned after a render that writes.
MAX_IDLE_SECONDS = 14 * 24 * 3600
_TAG = hashlib.sha256().digest_size
_KEY = re.compile(r"[0-9a-f]{64}")


def cache_root(repo_root: Path) -> Path:
    env = os.environ.get(CACHE_DIR_ENV)
    return Path(env) if env else repo_root / DEFAULT_DIR


def secret_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".config") / "obs-iac" / SECRET_FILE


def _private(path: Path) -> bytes | None:
    """The secret in ``path`` if only its owner, this user, can read it."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            return None  # a secret others can read is none
        data = os.read(fd, 4096).strip()
    finally:
        os.close(fd)
    return data if len(data) >= 32 else None


def load_secret() -> bytes | None:
    """This user's cache secret, created on first use; None when there is none to be had
    (then nothing is cached)."""
    env = os.environ.get(SECRET_ENV, "")
    if env:
        return env.encode()
    path = secret_path()
    try:
        return _private(path)
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f"{SECRET_FILE}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, secrets.token_hex(32).encode() + b"\n")
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # never replaces a secret another run created meanwhile
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        return _private(path)
    except OSError:
        return None


def write_atomic(path: Path, data: bytes) -> None:
    """Writes ``path`` whole or not at all (temporary file, then rename); a read-only or
    full disk costs speed, never a render."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        pass


class Cache:
    """``readable=False``: entries are written but never read (`render --check`, which
    must not trust anything it did not compute)."""

    def __init__(self, root: Path, secret: bytes | None = None, readable: bool = True) -> None:
        self.root = root
        self.secret = secret if secret is not None else load_secret()
        if os.path.islink(root) and not os.environ.get(CACHE_DIR_ENV):
            # A link committed in the repository would aim the cache's writes, and its
            # pruning, anywhere: not used. $OBS_IAC_CACHE_DIR may point anywhere.
            self.secret = None
        self.readable = readable
        self.hits = 0
        self.misses = 0

    def _path(self, kind: str, key: str) -> Path:
        return self.root / kind / key[:2] / key

    def _tag(self, kind: str, key: str, data: bytes) -> bytes:
        assert self.secret is not None
        mac = hmac.new(self.secret, f"obs-iac cache\0{kind}\0{key}\0".encode(), hashlib.sha256)
        mac.update(data)
        return mac.digest()

    def read(self, kind: str, key: str) -> bytes | None:
        """The entry's bytes if this user wrote them, else None."""
        if self.secret is None or not self.readable:
            return None
        try:
            raw = self._path(kind, key).read_bytes()
        except OSError:
            return None
        tag, data = raw[:_TAG], raw[_TAG:]
        if len(tag) != _TAG or not hmac.compare_digest(tag, self._tag(kind, key, data)):
            return None
        return data

    def count(self, hit: bool) -> None:
        if hit:
            self.hits += 1
        else:
            self.misses += 1

    def put(self, kind: str, key: str, data: bytes) -> None:
        if self.secret is not None:
            write_atomic(self._path(kind, key), self._tag(kind, key, data) + data)

    def prune(self, now: float | None = None) -> int:
        """Removes entries written more than MAX_IDLE_SECONDS ago; returns how many. An
        entry still in use is then written again once, which is cheaper than touching
        every entry on every render."""
        cutoff = (now if now is not None else time.time()) - MAX_IDLE_SECONDS
        removed = 0
        if not self.root.is_dir():
            return 0
        if self.secret is None:
            return 0
        for path in self.root.glob("*/*/*"):
            # Only what put() writes: <kind>/<2 hex>/<64 hex>, through no link.
            if not (_KEY.fullmatch(path.name) and path.parent.name == path.name[:2]):
                continue
            if path.parent.is_symlink() or path.parent.parent.is_symlink():
                continue
            try:
                if path.lstat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except OSError:
                continue
        return removed
