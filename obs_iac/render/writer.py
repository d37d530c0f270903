"""Writes rendered files into the output folder, owning only what it wrote.

- A manifest (``.obs-iac-manifest.json``) lists every file obs-iac owns, with its hash.
  Files not in it are never overwritten, moved or deleted.
- Nothing is written until every artifact has been generated and serialised.
- Writing is a journaled swap: every new file is first staged next to its target, a
  journal naming all the renames is written atomically, then the renames run. If the
  process dies after the journal exists, the next run finishes the swap before doing
  anything else; if it dies before, the staged files are discarded. Either way the tree
  is the old render or the new one, never a mix.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from obs_iac import conventions
from obs_iac.diagnostics import Diagnostic, InputError, Location, Severity

FileState = Literal["same", "adopt", "new", "changed", "foreign"]


@dataclass(frozen=True)
class FileRecord:
    """One file a render produces, and how it stands against the output folder."""

    path: str
    digest: str
    generator: str
    state: FileState  # against the output folder as it was when the render started


@dataclass(frozen=True)
class Drift:
    added: tuple[str, ...]
    changed: tuple[str, ...]
    removed: tuple[str, ...]
    foreign_conflicts: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        return not (self.added or self.changed or self.removed or self.foreign_conflicts)

    def summary(self) -> str:
        lines: list[str] = []
        for title, paths in (
            ("would add", self.added),
            ("would change", self.changed),
            ("would remove", self.removed),
            ("would overwrite a file obs-iac does not own", self.foreign_conflicts),
        ):
            lines.extend(f"  {title}: {p}" for p in paths)
        return "\n".join(lines)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_manifest(out: Path) -> dict[str, str]:
    path = out / conventions.MANIFEST
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text("utf-8"))
        files = data["files"]
        if not isinstance(files, dict):
            raise TypeError("files is not a mapping")
        return {str(k): str(v) for k, v in files.items()}
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(
            [
                Diagnostic(
                    "output/manifest",
                    Severity.ERROR,
                    f"the manifest of owned files is unreadable: {exc}",
                    hint=f"restore {conventions.MANIFEST} from git; obs-iac will not guess "
                    "which files it owns",
                    location=Location(str(path)),
                )
            ]
        ) from None


def manifest_bytes(files: Mapping[str, bytes]) -> bytes:
    return manifest_from_digests({p: _digest(data) for p, data in files.items()})


def manifest_from_digests(digests: Mapping[str, str]) -> bytes:
    payload = {
        "comment": "Files owned by obs-iac. Do not edit.",
        "files": {p: digests[p] for p in sorted(digests)},
        "version": 1,
    }
    return (json.dumps(payload, indent=2, sort_keys=True) + "\n").encode()


def compare(out: Path, files: Mapping[str, bytes]) -> Drift:
    owned = read_manifest(out)
    records = []
    for rel in sorted(files):
        target = out / rel
        data = files[rel]
        state: FileState
        if not target.is_file():
            state = "new"
        elif target.read_bytes() != data:
            state = "changed" if rel in owned else "foreign"
        else:
            state = "same" if rel in owned else "adopt"  # adopt: identical, not yet owned
        records.append(FileRecord(rel, _digest(data), "", state))
    return drift_of(out, records)


def _foreign(out: Path, paths: Iterable[str]) -> InputError:
    return InputError(
        [
            Diagnostic(
                "output/foreign-file",
                Severity.ERROR,
                f"{p} exists, differs from what obs-iac would write, and obs-iac does not own it",
                hint="move the file away or delete it; obs-iac never overwrites files it did "
                "not write",
                location=Location(str(out / p)),
            )
            for p in paths
        ]
    )


def _stage(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)


def recover(out: Path) -> None:
    """Finishes a swap that a previous run started, or discards one it never committed."""
    journal = out / conventions.JOURNAL
    if journal.is_file():
        plan = json.loads(journal.read_text("utf-8"))
        _apply(out, plan)
        journal.unlink()
    if out.is_dir():
        for stray in out.rglob(f"*{conventions.TMP_SUFFIX}"):
            stray.unlink()


def _apply(out: Path, plan: dict[str, list[str]]) -> None:
    for rel in plan["replace"]:
        staged = out / (rel + conventions.TMP_SUFFIX)
        if staged.exists():
            os.replace(staged, out / rel)
    for rel in plan["remove"]:
        target = out / rel
        if target.exists():
            target.unlink()
            _prune_empty_dirs(out, target.parent)
    manifest = out / (conventions.MANIFEST + conventions.TMP_SUFFIX)
    if manifest.exists():
        os.replace(manifest, out / conventions.MANIFEST)


def _prune_empty_dirs(out: Path, folder: Path) -> None:
    root = out.resolve()
    while folder.resolve() != root and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def write(out: Path, files: Mapping[str, bytes], force_adopt: bool = False) -> Drift:
    """Brings the output folder to exactly ``files`` (plus untouched foreign files)."""
    out.mkdir(parents=True, exist_ok=True)
    recover(out)
    drift = compare(out, files)
    if drift.foreign_conflicts and not force_adopt:
        raise _foreign(out, drift.foreign_conflicts)
    if drift.clean:
        return drift
    replace = sorted(set(drift.added) | set(drift.changed) - {conventions.MANIFEST})
    for rel in replace:
        _stage(out / (rel + conventions.TMP_SUFFIX), files[rel])
    _swap(out, replace, drift.removed, manifest_bytes(files))
    return drift


def _swap(out: Path, replace: list[str], remove: Iterable[str], manifest: bytes) -> None:
    """Commits the staged files ``replace`` and the new manifest, removes ``remove``."""
    _stage(out / (conventions.MANIFEST + conventions.TMP_SUFFIX), manifest)
    journal = {"remove": list(remove), "replace": replace}
    _stage(out / (conventions.JOURNAL + conventions.TMP_SUFFIX), json.dumps(journal).encode())
    # One flush for every staged file instead of an fsync per file (thousands of them at
    # fleet scale): the staged data must be durable before the journal commits to it.
    os.sync()
    # The commit point: once the journal exists, the new tree is what recovery produces.
    os.replace(out / (conventions.JOURNAL + conventions.TMP_SUFFIX), out / conventions.JOURNAL)
    _apply(out, journal)
    (out / conventions.JOURNAL).unlink()


# -- the engine's path: files were compared and staged by the shards -----------------------


def drift_of(out: Path, records: Iterable[FileRecord]) -> Drift:
    """The drift that file records describe: what a write would add, change, remove."""
    owned = read_manifest(out)
    added: list[str] = []
    changed: list[str] = []
    conflicts: list[str] = []
    digests: dict[str, str] = {}
    for record in sorted(records, key=lambda r: r.path):
        digests[record.path] = record.digest
        if record.state in ("new", "adopt"):
            added.append(record.path)
        elif record.state == "changed":
            changed.append(record.path)
        elif record.state == "foreign":
            conflicts.append(record.path)
    removed = sorted(p for p in owned if p not in digests and (out / p).exists())
    manifest = out / conventions.MANIFEST
    stale_manifest = owned and manifest.read_bytes() != manifest_from_digests(digests)
    if stale_manifest and not (added or changed or removed):
        changed.append(conventions.MANIFEST)
    return Drift(tuple(added), tuple(changed), tuple(removed), tuple(conflicts))


def discard(out: Path, staged: Iterable[str]) -> None:
    """Removes staged files, and the folders staging created, so that a render that is not
    committed leaves the output folder as it found it."""
    for rel in staged:
        target = out / (rel + conventions.TMP_SUFFIX)
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        with contextlib.suppress(OSError):
            _prune_empty_dirs(out, target.parent)


def discard_all(out: Path, existed: bool) -> None:
    """discard() for every staged file, known or not (a render that failed midway)."""
    if not out.is_dir():
        return
    discard(
        out,
        [
            str(p.relative_to(out))[: -len(conventions.TMP_SUFFIX)]
            for p in out.rglob(f"*{conventions.TMP_SUFFIX}")
        ],
    )
    if not existed and not any(out.iterdir()):
        out.rmdir()


def commit(
    out: Path, records: Iterable[FileRecord], staged: Iterable[str], force_adopt: bool = False
) -> Drift:
    """Swaps in what the engine staged, with the same journal as write()."""
    records = list(records)
    staged = list(staged)
    drift = drift_of(out, records)
    if drift.foreign_conflicts and not force_adopt:
        discard(out, staged)
        raise _foreign(out, drift.foreign_conflicts)
    if drift.clean:
        discard(out, staged)
        return drift
    digests = {r.path: r.digest for r in records}
    _swap(out, sorted(set(staged)), drift.removed, manifest_from_digests(digests))
    return drift
