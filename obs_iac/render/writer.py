"""Writes rendered files into the output folder, owning only what it wrote.

- A manifest (``.obs-iac-manifest.json``) lists every file obs-iac owns, with its hash.
  Files not in it are never overwritten, moved or deleted.
- The manifest and the journal are committed with the repository, so they are untrusted
  input: every path they name, and every path a generator writes, must stay inside the
  output folder and pass through no symbolic link (check_paths). Anything else is a
  located error naming the file that holds the path, before anything is touched.
- Nothing is written until every artifact has been generated and serialised.
- Writing is a journaled swap: every new file is first staged in ``.obs-iac-staging/``
  (obs-iac's own folder, at the same relative path), a journal naming all the renames is
  written atomically, then the renames run. If the process dies after the journal
  exists, the next run finishes the swap before doing anything else (from the staged
  manifest when the journal itself is damaged); if it dies before, the staging folder is
  discarded. Either way the tree becomes the old render or the new one. While the
  journal exists the tree is mid-swap, and `render --check` says so.
- A file system fault (read-only, full, permission denied) is an error with exit 2, and
  the tree is left as it was (see fault()).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
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


# Errors of the environment, not of obs-iac: each gets exit 2 and a hint.
_FAULT_HINTS = {
    errno.EROFS: "the file system is read-only; render into a writable checkout "
    "(`obs-iac render --check` needs no write access)",
    errno.ENOSPC: "the disk is full; free some space and render again",
    errno.EDQUOT: "the disk quota is exhausted; free some space and render again",
    errno.EACCES: "check the owner and permissions of that path",
    errno.EPERM: "check the owner, permissions and attributes of that path",
    errno.ENOTDIR: "a file stands where obs-iac needs a folder; move it away",
    errno.EISDIR: "a folder stands where obs-iac writes a file; move it away",
    errno.EEXIST: "something stands where obs-iac needs a folder; move it away",
    errno.EIO: "the disk reported an I/O error",
    errno.EMFILE: "too many open files; raise the limit (ulimit -n)",
    errno.ENAMETOOLONG: "the path is too long for this file system",
    errno.EXDEV: "the output folder spans two file systems; obs-iac renames files within one",
}
FAULT_ERRNOS = frozenset(_FAULT_HINTS)


def fault(exc: OSError, doing: str, untouched: bool = True) -> InputError:
    """A file system fault as a located error. ``untouched``: the output folder is as it
    was (false only once a swap has started; then the next render finishes it)."""
    where = exc.filename if exc.filename is not None else ""
    reason = exc.strerror or str(exc)
    hint = _FAULT_HINTS.get(exc.errno or 0, "fix the file system problem and run again")
    hint += (
        "; nothing was changed"
        if untouched
        else "; the swap is journaled: the next render finishes it"
    )
    return InputError(
        [
            Diagnostic(
                "output/io-error",
                Severity.ERROR,
                f"cannot {doing}: {reason}" + (f" ({where})" if where else ""),
                hint=hint,
                location=Location(str(where)) if where else None,
            )
        ]
    )


def unsafe_path(holder: Path, rel: str, reason: str) -> Diagnostic:
    return Diagnostic(
        "output/unsafe-path",
        Severity.ERROR,
        f"{rel!r} {reason}",
        hint="obs-iac only reads, writes and deletes files inside the output folder, "
        "through no symbolic link; restore this file from a trusted revision (or delete the "
        "link) and run again",
        location=Location(str(holder)),
    )


class PathGuard:
    """The path rule for one output folder: a path must be relative, stay inside the
    folder, and pass through no symbolic link. Folders already checked are remembered,
    so a fleet's thousands of paths cost one lstat per folder."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self._dirs: set[str] = set()

    def reason(self, rel: str, last: bool = True) -> str | None:
        """Why ``rel`` breaks the rule (None when it does not). ``last=False`` leaves the
        final component unchecked: enough for a path that is only pruned (unlink
        removes a link, never its target), and one lstat fewer per owned file."""
        pure = PurePosixPath(rel)
        if not rel or pure.is_absolute() or "\\" in rel or Path(rel).is_absolute():
            return "is not a path relative to the output folder"
        if ".." in pure.parts or not conventions.is_safe_relative(rel):
            return "leaves the output folder, or names one of obs-iac's own files"
        parts = pure.parts
        current = ""
        for index, part in enumerate(parts):
            current = f"{current}/{part}" if current else part
            final = index == len(parts) - 1
            if final and not last:
                return None
            if not final and current in self._dirs:
                continue
            try:
                mode = os.lstat(self.out / current).st_mode
            except FileNotFoundError:
                return None
            except OSError:
                return None  # reported by whatever reads or writes it next
            if stat.S_ISLNK(mode):
                return f"passes through the symbolic link {self.out / current}"
            if not final:
                if not stat.S_ISDIR(mode):
                    return None  # a file where a folder should be: a fault, reported later
                self._dirs.add(current)
        return None

    def check(self, rels: Iterable[str], holder: Path | None = None, last: bool = True) -> None:
        """Raises the located error for every path that breaks the rule; ``holder`` is
        the file that names them (default: the path itself)."""
        problems = []
        for rel in rels:
            why = self.reason(rel, last)
            if why is not None:
                problems.append(unsafe_path(holder or self.out / rel, rel, why))
        if problems:
            raise InputError(problems)


def check_output_folder(out: Path) -> None:
    """The output folder is a folder (or absent); obs-iac's staging folder, if present,
    is a real folder and not a link planted in the repository."""
    for path, what in (
        (out, "the output folder"),
        (out / conventions.STAGING, "the staging folder"),
    ):
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise fault(exc, f"read {what}") from None
        if path == out and stat.S_ISLNK(mode):
            mode = os.stat(path).st_mode if path.exists() else mode
        if not stat.S_ISDIR(mode):
            kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a directory"
            raise InputError(
                [
                    Diagnostic(
                        "output/not-a-folder",
                        Severity.ERROR,
                        f"{path} is {kind}; obs-iac needs {what} to be a directory",
                        hint="move it away (or set `output` in [tool.obs-iac] to another "
                        "folder); nothing was changed",
                        location=Location(str(path)),
                    )
                ]
            )


def staged_path(out: Path, rel: str) -> Path:
    return out / conventions.STAGING / rel


def read_manifest(out: Path) -> dict[str, str]:
    """The files obs-iac owns in ``out``, every path checked against the path rule."""
    path = out / conventions.MANIFEST
    try:
        if not path.is_file():
            return {}
        text = path.read_text("utf-8")
    except OSError as exc:
        raise fault(exc, "read the manifest") from None
    owned = _parse_manifest(path, text)
    # Owned files are read and written only as artifacts, which _settle checks whole.
    PathGuard(out).check(owned, holder=path, last=False)
    return owned


def _parse_manifest(path: Path, text: str) -> dict[str, str]:
    try:
        data = json.loads(text)
        files = data["files"]
        if not isinstance(files, dict):
            raise TypeError("files is not a mapping")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
            raise TypeError("every entry must map a path to a digest")
        return dict(files)
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
    PathGuard(out).check(files)
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


def stage(out: Path, rel: str, data: bytes) -> None:
    """Stages one file of a render; its target's folder is created now, so that the
    swap itself only renames."""
    (out / rel).parent.mkdir(parents=True, exist_ok=True)
    _stage(staged_path(out, rel), data)


Plan = dict[str, list[str]]


def _journal_plan(journal: Path) -> Plan | None:
    """The journal's renames, or None when it is damaged (a crash while it was written,
    on a file system that does not keep the rename after the data)."""
    try:
        data = json.loads(journal.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    plan: Plan = {}
    for key in ("remove", "replace"):
        value = data.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return None
        plan[key] = value
    return plan


def _rebuilt_plan(out: Path, journal: Path) -> Plan:
    """The renames of a swap whose journal is damaged, from what the swap left: the
    staged manifest names the new tree, and is renamed last, so its absence means the
    swap had finished."""
    staged_manifest = staged_path(out, conventions.MANIFEST)
    if not staged_manifest.exists():
        return {"remove": [], "replace": []}
    try:
        new = _parse_manifest(staged_manifest, staged_manifest.read_text("utf-8"))
        current = out / conventions.MANIFEST
        old = _parse_manifest(current, current.read_text("utf-8")) if current.exists() else {}
    except (InputError, OSError, UnicodeDecodeError):
        rel_out = out.name
        raise InputError(
            [
                Diagnostic(
                    "output/journal",
                    Severity.ERROR,
                    "an interrupted render left a damaged journal, and what it staged cannot "
                    "be read either",
                    hint=f"restore the output folder: `rm -r {rel_out}/{conventions.JOURNAL} "
                    f"{rel_out}/{conventions.STAGING} && git checkout -- {rel_out}/`, then "
                    "run `obs-iac render`",
                    location=Location(str(journal)),
                )
            ]
        ) from None
    replace = sorted(rel for rel in new if staged_path(out, rel).is_file())
    return {"remove": sorted(set(old) - set(new)), "replace": replace}


def recover(out: Path) -> None:
    """Finishes a swap that a previous run started, or discards one it never committed."""
    journal = out / conventions.JOURNAL
    check_output_folder(out)
    if os.path.lexists(journal):
        plan = _journal_plan(journal)
        if plan is None:
            plan = _rebuilt_plan(out, journal)
        PathGuard(out).check([*plan["replace"], *plan["remove"]], holder=journal)
        try:
            _apply(out, plan)
            journal.unlink()
        except OSError as exc:
            raise fault(exc, "finish the interrupted swap", untouched=False) from None
    _clear_staging(out)


def _clear_staging(out: Path) -> None:
    staging = out / conventions.STAGING
    if not os.path.lexists(staging):
        return
    check_output_folder(out)
    rels = [
        p.relative_to(staging).as_posix()
        for p in staging.rglob("*")
        if not p.is_dir() or p.is_symlink()
    ]
    try:
        shutil.rmtree(staging)
    except OSError as exc:
        raise fault(exc, "remove the staging folder") from None
    for rel in rels:
        with contextlib.suppress(OSError):
            _prune_empty_dirs(out, (out / rel).parent)


_PREVIOUS = ".obs-iac-previous"  # inside the staging folder: the old files, for rollback


Undo = list[tuple[str, bool, bool]]  # (path, an old file existed, and was kept)


def _apply(out: Path, plan: Plan, undo: Undo | None = None) -> None:
    """Runs the swap's renames and removals. With ``undo``, each step first keeps the old
    file (a hard link: no copy) and records itself there, so a fault halfway can be
    rolled back (_roll_back) instead of leaving a mixed tree."""
    previous = out / conventions.STAGING / _PREVIOUS
    for rel in plan["replace"]:
        staged = staged_path(out, rel)
        if staged.is_file():
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            existed = target.is_file()
            kept = undo is not None and _keep(target, previous / rel)
            os.replace(staged, target)
            if undo is not None:
                undo.append((rel, existed, kept))
    for rel in plan["remove"]:
        target = out / rel
        if target.is_file():
            kept = undo is not None and _keep(target, previous / rel)
            target.unlink()
            if undo is not None:
                undo.append((rel, True, kept))
            _prune_empty_dirs(out, target.parent)
    manifest = staged_path(out, conventions.MANIFEST)
    if manifest.exists():
        os.replace(manifest, out / conventions.MANIFEST)


def _keep(target: Path, backup: Path) -> bool:
    if not target.is_file():
        return False
    try:
        backup.parent.mkdir(parents=True, exist_ok=True)
        os.link(target, backup)
        return True
    except OSError:
        return False  # no hard links here: this step cannot be undone


def _roll_back(out: Path, undo: Undo) -> bool:
    """Undoes the steps in ``undo``, newest first; True when the old tree is back."""
    previous = out / conventions.STAGING / _PREVIOUS
    complete = True
    for rel, existed, kept in reversed(undo):
        target = out / rel
        try:
            if kept:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(previous / rel, target)
            elif existed:
                complete = False  # the old file is gone for good: only forward is safe
            elif target.is_file():
                target.unlink()  # it was new
                _prune_empty_dirs(out, target.parent)
        except OSError:
            complete = False
    return complete


def _prune_empty_dirs(out: Path, folder: Path) -> None:
    root = out.resolve()
    while folder.resolve() != root and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def prepare(out: Path) -> None:
    """Before a render writes: the output folder exists, and any earlier swap is done."""
    check_output_folder(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fault(exc, "create the output folder") from None
    recover(out)


def write(out: Path, files: Mapping[str, bytes], force_adopt: bool = False) -> Drift:
    """Brings the output folder to exactly ``files`` (plus untouched foreign files)."""
    prepare(out)
    drift = compare(out, files)
    if drift.foreign_conflicts and not force_adopt:
        raise _foreign(out, drift.foreign_conflicts)
    if drift.clean:
        return drift
    replace = sorted(set(drift.added) | set(drift.changed) - {conventions.MANIFEST})
    try:
        for rel in replace:
            stage(out, rel, files[rel])
    except OSError as exc:
        discard(out, replace)
        raise fault(exc, "stage the rendered files") from None
    _swap(out, replace, drift.removed, manifest_bytes(files))
    return drift


def _swap(out: Path, replace: list[str], remove: Iterable[str], manifest: bytes) -> None:
    """Commits the staged files ``replace`` and the new manifest, removes ``remove``."""
    remove = list(remove)
    journal = {"remove": remove, "replace": replace}
    staged_journal = staged_path(out, conventions.JOURNAL)
    try:
        _stage(staged_path(out, conventions.MANIFEST), manifest)
        _stage(staged_journal, json.dumps(journal).encode())
        # Renames and removals need write access to their folders: find out now, while
        # the old tree is still whole, rather than halfway through the swap.
        for folder in sorted({(out / rel).parent for rel in [*replace, *remove]} | {out}):
            if folder.is_dir() and not os.access(folder, os.W_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(folder))
        # One flush for every staged file instead of an fsync per file (thousands of them
        # at fleet scale): the staged data must be durable before the journal commits.
        os.sync()
        # The commit point: once the journal exists, the new tree is what recovery gives.
        os.replace(staged_journal, out / conventions.JOURNAL)
    except OSError as exc:
        discard(out, replace)
        raise fault(exc, "stage the rendered files") from None
    undo: Undo = []
    try:
        _apply(out, journal, undo)
        (out / conventions.JOURNAL).unlink()
    except OSError as exc:
        # Halfway through: put the old files back, then forget the swap. If that fails
        # too, the journal stays and the next render finishes the swap instead.
        restored = _roll_back(out, undo)
        if restored and not os.path.exists(staged_path(out, conventions.MANIFEST)):
            restored = False  # the manifest was already swapped: only forward is safe
        if restored:
            with contextlib.suppress(OSError):
                (out / conventions.JOURNAL).unlink()
                _clear_staging(out)
        raise fault(exc, "swap in the rendered files", untouched=restored) from None
    with contextlib.suppress(InputError):
        _clear_staging(out)


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
    """Removes the staging folder, and the folders staging created, so that a render that
    is not committed leaves the output folder as it found it."""
    staging = out / conventions.STAGING
    with contextlib.suppress(OSError):
        if staging.is_dir() and not staging.is_symlink():
            shutil.rmtree(staging)
    for rel in staged:
        with contextlib.suppress(OSError):
            _prune_empty_dirs(out, (out / rel).parent)


def discard_all(out: Path, existed: bool) -> None:
    """discard() for every staged file, known or not (a render that failed midway)."""
    staging = out / conventions.STAGING
    if not out.is_dir():
        return
    rels: list[str] = []
    if staging.is_dir() and not staging.is_symlink():
        rels = [p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file()]
    discard(out, rels)
    with contextlib.suppress(OSError):
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
