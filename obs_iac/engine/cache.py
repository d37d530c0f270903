"""A content-addressed cache of per-service work.

An entry's name is the digest of everything its content depends on (see keys.py), so an
entry is never invalidated, only no longer asked for. Entries are written atomically
(temporary file, then rename); one that cannot be read back is treated as missing, never
trusted. Deleting the whole folder is always safe: the next render recomputes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

CACHE_DIR_ENV = "OBS_IAC_CACHE_DIR"
DEFAULT_DIR = ".obs-iac-cache"
# Entries older than this are pruned after a render that writes.
MAX_IDLE_SECONDS = 14 * 24 * 3600


def cache_root(repo_root: Path) -> Path:
    env = os.environ.get(CACHE_DIR_ENV)
    return Path(env) if env else repo_root / DEFAULT_DIR


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
    def __init__(self, root: Path) -> None:
        self.root = root
        self.hits = 0
        self.misses = 0

    def _path(self, kind: str, key: str) -> Path:
        return self.root / kind / key[:2] / key

    def read(self, kind: str, key: str) -> bytes | None:
        try:
            return self._path(kind, key).read_bytes()
        except OSError:
            return None

    def count(self, hit: bool) -> None:
        if hit:
            self.hits += 1
        else:
            self.misses += 1

    def put(self, kind: str, key: str, data: bytes) -> None:
        write_atomic(self._path(kind, key), data)

    def prune(self, now: float | None = None) -> int:
        """Removes entries written more than MAX_IDLE_SECONDS ago; returns how many. An
        entry still in use is then written again once, which is cheaper than touching
        every entry on every render."""
        cutoff = (now if now is not None else time.time()) - MAX_IDLE_SECONDS
        removed = 0
        if not self.root.is_dir():
            return 0
        for path in self.root.glob("*/*/*"):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except OSError:
                continue
        return removed
