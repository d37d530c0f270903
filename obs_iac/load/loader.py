"""Runs blueprint files and turns every mistake in them into a located diagnostic.

Each file runs in a fresh namespace with no access to the others' state. Files are
discovered sorted by their path, and nothing afterwards depends on discovery order.

Each runs in a box (_boxed): a time limit, its stdout sent to stderr (the tool's stdout
carries JSON), and every way out of it, an exit call or any exception class, reported
as a located error. The box catches mistakes, not malice: a blueprint is Python run in
obs-iac's process (docs/limitations.md).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import marshal
import os
import posix
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import CodeType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from obs_iac.blueprint.locate import find_call, locate
from obs_iac.blueprint.registry import Registration, collecting, stop_collecting
from obs_iac.blueprint.suggest import blueprint_model_named, unknown_key_hint
from obs_iac.diagnostics import Diagnostic, InputError, Location, Severity
from obs_iac.escaping import UNION_TAGS

if TYPE_CHECKING:
    from obs_iac.config import RepoConfig
    from obs_iac.engine.cache import Cache


@dataclass(frozen=True)
class BlueprintFile:
    path: str  # relative to the repository root, POSIX form
    source: str
    filename: str = ""  # as the code was compiled (absolute), for the parser's messages

    @cached_property
    def tree(self) -> ast.Module:
        """Parsed on first use: only diagnostics need the syntax tree (to point at a
        keyword), and parsing every blueprint costs more than running it."""
        return ast.parse(self.source, filename=self.filename or self.path)


@dataclass(frozen=True)
class LoadedBlueprints:
    files: tuple[BlueprintFile, ...]
    registrations: tuple[Registration, ...]
    # Files that failed to run; validation still checks every other file, so one run
    # reports every mistake in the repository.
    problems: tuple[Diagnostic, ...] = ()

    @cached_property
    def _by_path(self) -> dict[str, BlueprintFile]:
        return {f.path: f for f in self.files}

    def file(self, path: str) -> BlueprintFile | None:
        return self._by_path.get(path)

    def tree(self, path: str) -> ast.Module | None:
        found = self._by_path.get(path)
        return found.tree if found is not None else None


def discover_files(root: Path, folder: str) -> list[Path]:
    base = root / folder
    if not base.is_dir():
        return []
    return sorted(
        (
            p
            for p in base.rglob("*.py")
            if not any(part.startswith((".", "_")) for part in p.relative_to(base).parts)
        ),
        key=lambda p: p.relative_to(root).as_posix(),
    )


def _rel(root: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def validation_diagnostics(
    exc: ValidationError,
    file: str,
    tree: ast.AST | None,
    line: int,
    prefix: tuple[str | int, ...] = (),
    object_path: tuple[str, ...] = (),
    prefix_in_call: bool = False,
    model: type[BaseModel] | None = None,
) -> list[Diagnostic]:
    """One diagnostic per pydantic error, each pointing at the line that wrote the field.
    ``model`` (the model validated, by default the one the error's title names) lets an
    unknown key get a did-you-mean from the fields of the model it was written in."""
    root = model if model is not None else blueprint_model_named(str(exc.title))
    call = find_call(tree, line) if tree is not None else None
    diags = []
    for err in exc.errors(include_url=False):
        # A "text or Template" field names the union branch in the path; users wrote
        # the field, not the branch.
        loc = tuple(p for p in err["loc"] if p not in UNION_TAGS)
        field_line, column = (line, 0)
        if call is not None:
            field_line, column = locate(call, (*prefix, *loc) if prefix_in_call else loc)
            field_line = field_line or line
        path = ".".join(str(p) for p in (*prefix, *loc)) or "(service)"
        diags.append(
            Diagnostic(
                code="blueprint/invalid",
                severity=Severity.ERROR,
                message=f"{path}: {_message(err)}",
                hint=_hint(err, root),
                location=Location(file, field_line, column or None),
                object_path=object_path,
            )
        )
    return diags


def _message(err: Any) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    given = err.get("input")
    text = str(err["msg"])
    if kind == "string_pattern_mismatch":
        pattern = err.get("ctx", {}).get("pattern", "")
        return f"{given!r} does not match the expected pattern {pattern}"
    if isinstance(given, (str, int, float, bool)) and kind not in ("value_error",):
        return f"{text} (got {given!r})"
    return text.removeprefix("Value error, ")


def _hint(err: Any, root: type[BaseModel] | None = None) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        known = unknown_key_hint(root, tuple(err["loc"]))
        return (known + "; " if known else "check the spelling; ") + (
            "`obs-iac schema` lists every field and section"
        )
    if kind == "missing":
        return "add the field; `obs-iac schema` describes it"
    if kind.startswith(("int_", "float_", "bool_", "string_type", "tuple_", "list_")):
        return "expected type: " + str(err["msg"]).replace("Input should be ", "")
    return "`obs-iac schema` describes every field, with its type and pattern"


def _keyword_path(tree: ast.AST, line: int) -> tuple[str | int, ...]:
    """The keywords (and list positions) leading to the model built on ``line``: a
    GpuFleet passed as ``service(gpu=GpuFleet(...))`` reports its fields as
    ``gpu.<field>``, the first of ``slo=[Slo(...)]`` as ``slo.0.<field>``."""
    call = find_call(tree, line)
    if call is None:
        return ()
    parents: dict[ast.AST, ast.AST] = {
        child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)
    }
    path: list[str | int] = []
    node: ast.AST = call
    while node in parents:
        parent = parents[node]
        if isinstance(parent, ast.keyword) and parent.arg is not None:
            path.append(parent.arg)
        elif isinstance(parent, (ast.List, ast.Tuple)) and isinstance(node, ast.expr):
            path.append(parent.elts.index(node))
        elif not isinstance(parent, ast.Call):
            break
        node = parent
    # Positions without a keyword above them (a list assigned to a name) say nothing.
    return tuple(reversed(path)) if any(isinstance(p, str) for p in path) else ()


def _python_error_text(exc: BaseException) -> str:
    """``Type: message`` as Python prints it, with its own "Did you mean" for a NameError
    or AttributeError. Python 3.12+ puts the suggestion in the traceback module's
    output; 3.10 and 3.11 add it only in the interpreter's own printer (PyErr_Display),
    which writes to ``sys.stderr``: so that printer is asked, into a buffer."""
    lines = traceback.format_exception_only(type(exc), exc)
    text = "".join(lines).strip().splitlines()[-1] if lines else type(exc).__name__
    if "Did you mean" in text or not isinstance(exc, (NameError, AttributeError, ImportError)):
        return text
    import io

    buffer = io.StringIO()
    saved = sys.stderr
    try:
        sys.stderr = buffer
        sys.__excepthook__(type(exc), exc, exc.__traceback__)
    except Exception:  # the plain text is still right, only less helpful
        return text
    finally:
        sys.stderr = saved
    printed = [line for line in buffer.getvalue().splitlines() if line.strip()]
    last = printed[-1].strip() if printed else ""
    return last if last.startswith(type(exc).__name__) and "Did you mean" in last else text


def _user_frame_line(exc: BaseException, filename: str) -> int | None:
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == filename:
            line = lineno
    return line


DEFAULT_TIMEOUT_SECONDS = 60.0


class _BlueprintExit(BaseException):
    """os._exit() called by a blueprint: raised instead, so the run goes on."""

    def __init__(self, call: str, code: object) -> None:
        super().__init__(code)
        self.call = call
        self.code = code


class _BlueprintTimeout(BaseException):
    pass


@contextlib.contextmanager
def _boxed(limit: float) -> Iterator[None]:
    """Runs a blueprint with a time limit, its output on stderr, and exit calls raised."""

    def refuse(call: str) -> Any:
        def _exit(code: object = 0) -> None:
            raise _BlueprintExit(call, code)

        return _exit

    saved_exits = (os._exit, posix._exit)
    os._exit = refuse("os._exit")
    posix._exit = refuse("posix._exit")
    # File descriptor 1 too: os.write(1, ...) and C extensions bypass sys.stdout.
    sys.stdout.flush()
    saved_fd: int | None = None
    with contextlib.suppress(OSError, ValueError):
        saved_fd = os.dup(1)
        os.dup2(2, 1)
    timed = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    previous: Any = None
    if timed:

        def expired(_signum: int, _frame: object) -> None:
            raise _BlueprintTimeout()

        previous = signal.signal(signal.SIGALRM, expired)
        signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if timed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        os._exit, posix._exit = saved_exits
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        if saved_fd is not None:
            os.dup2(saved_fd, 1)
            os.close(saved_fd)


def _compiled(source: str, filename: str, code_cache: Cache | None) -> CodeType:
    """The blueprint's bytecode, from the cache when the same source was compiled for
    the same path by the same Python before."""
    if code_cache is None:
        return compile(source, filename, "exec")
    key = hashlib.sha256(
        f"{sys.version}\0{filename}\0{source}".encode("utf-8", "surrogatepass")
    ).hexdigest()
    data = code_cache.read("code", key)
    if data is not None:
        try:
            code = marshal.loads(data)
            if isinstance(code, CodeType):
                return code
        except (ValueError, EOFError, TypeError):
            pass  # a damaged entry is a miss
    code = compile(source, filename, "exec")
    code_cache.put("code", key, marshal.dumps(code))
    return code


def load_blueprints(
    root: Path,
    folder: str,
    files: list[Path] | None = None,
    code_cache: Cache | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> LoadedBlueprints:
    """Runs every blueprint, each for at most ``timeout`` seconds."""
    paths = discover_files(root, folder) if files is None else files
    loaded: list[BlueprintFile] = []
    registrations: list[Registration] = []
    problems: list[Diagnostic] = []
    for path in paths:
        rel = _rel(root, path)
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(
                Diagnostic(
                    "blueprint/unreadable",
                    Severity.ERROR,
                    f"cannot read blueprint: {exc}",
                    hint="blueprints are UTF-8 Python files",
                    location=Location(rel),
                )
            )
            continue
        try:
            code = _compiled(source, str(path), code_cache)
        except SyntaxError as exc:
            problems.append(
                Diagnostic(
                    "blueprint/syntax",
                    Severity.ERROR,
                    f"Python syntax error: {exc.msg}",
                    hint="fix the Python syntax; the blueprint was not run",
                    location=Location(rel, exc.lineno, exc.offset),
                )
            )
            continue
        blueprint = BlueprintFile(rel, source, str(path))
        loaded.append(blueprint)
        namespace: dict[str, Any] = {"__name__": f"obs_iac_blueprint:{rel}", "__file__": str(path)}
        sink, token = collecting()
        try:
            with _boxed(timeout):
                exec(code, namespace)
        except ValidationError as exc:
            line = _user_frame_line(exc, str(path)) or 1
            prefix = _keyword_path(blueprint.tree, line) or (str(exc.title),)
            problems.extend(validation_diagnostics(exc, rel, blueprint.tree, line, prefix=prefix))
        except (SystemExit, _BlueprintExit) as exc:
            # Left alone they would end obs-iac itself, with the blueprint's exit code and
            # nothing rendered or checked (`render --check` exiting 0 having checked nothing).
            call = exc.call if isinstance(exc, _BlueprintExit) else "exit"
            problems.append(
                _blueprint_error(
                    rel,
                    _user_frame_line(exc, str(path)),
                    f"the blueprint called {call}({exc.code!r})",
                    "a blueprint should only declare services; remove the exit call",
                )
            )
        except _BlueprintTimeout as exc:
            problems.append(
                _blueprint_error(
                    rel,
                    _user_frame_line(exc, str(path)),
                    f"the blueprint did not finish within {timeout:g} s; stopped here",
                    "a blueprint should only declare services; look for a loop that never "
                    "ends, or raise blueprint_timeout_seconds in [tool.obs-iac]",
                )
            )
        except KeyboardInterrupt:
            raise  # the user's Ctrl-C, not the blueprint's business
        except BaseException as exc:
            problems.append(
                _blueprint_error(
                    rel,
                    _user_frame_line(exc, str(path)),
                    f"the blueprint raised {_python_error_text(exc)}",
                    "check the spelling, or import the name (the blueprint API is "
                    "`from obs_iac import ...`)"
                    if isinstance(exc, NameError)
                    else "a blueprint should only declare services; run it with "
                    "`python -X dev` to debug",
                )
            )
        finally:
            stop_collecting(token)
        for reg in sink:
            registrations.append(
                Registration(fields=reg.fields, file=rel, line=reg.line, column=reg.column)
            )
    return LoadedBlueprints(tuple(loaded), tuple(registrations), tuple(problems))


def _blueprint_error(rel: str, line: int | None, message: str, hint: str) -> Diagnostic:
    return Diagnostic(
        "blueprint/error", Severity.ERROR, message, hint=hint, location=Location(rel, line)
    )


def no_services(
    root: Path, config: RepoConfig, config_file: str, loaded: LoadedBlueprints
) -> InputError:
    """Why no service was declared, with the next step: each way of getting here (no
    folder, a setting naming a missing folder, an empty folder, files that never call
    service()) has its own message."""
    folder = config.blueprints
    where = root.resolve()
    if not (root / folder).is_dir():
        default = type(config).model_fields["blueprints"].default
        if "blueprints" in config.model_fields_set and folder != default:
            section = "obs-iac.toml" if config_file == "obs-iac.toml" else "[tool.obs-iac]"
            return _input_error(
                "config/missing-folder",
                f"{section} blueprints = {folder!r}: there is no folder {folder}/ in {where}",
                f"fix the `blueprints` setting in {config_file or 'pyproject.toml'}, or create "
                f"{folder}/ and add a blueprint that calls service(...)",
                Location(config_file or "pyproject.toml"),
            )
        settings = (
            ""
            if config_file
            else f"; {where} has no obs-iac settings either (obs-iac.toml, or [tool.obs-iac] "
            "in pyproject.toml): is --root right?"
        )
        return _input_error(
            "blueprint/no-folder",
            f"there is no {folder}/ folder in {where}",
            f"create {folder}/ with a file that calls obs_iac.service(...) (`obs-iac init DIR` "
            "scaffolds a repository with an example), or point the `blueprints` setting of "
            f"[tool.obs-iac] at your folder{settings}",
            Location(folder),
        )
    if not loaded.files:
        return _input_error(
            "blueprint/empty",
            f"{folder}/ has no blueprint files",
            "add a Python file that calls obs_iac.service(...) (files and folders whose names "
            "start with '_' or '.' are skipped); `obs-iac init DIR` writes an example",
            Location(folder),
        )
    names = [f.path for f in loaded.files]
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return _input_error(
        "blueprint/none",
        f"no service is declared under {folder}/: {shown} ran but never called service()",
        "declare each service with `from obs_iac import service` and `service(name=..., "
        "team=..., ...)`; `obs-iac schema` lists the fields. Helpers without a service go in "
        "files whose names start with '_'",
        Location(names[0]),
    )


def _input_error(code: str, message: str, hint: str, location: Location) -> InputError:
    return InputError([Diagnostic(code, Severity.ERROR, message, hint=hint, location=location)])
