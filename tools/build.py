#!/usr/bin/env python3
"""`make tools`: builds the current stack pinned in tools/versions.toml.

Builds every Go module of ours under tools/ into ``$OBS_IAC_TOOLS_DIR/bin`` (default
``~/.cache/obs-iac/tools/bin``): the wrapper modules named in versions.toml (Prometheus,
Alertmanager, the OpenTelemetry Collector) and, by one generic rule, every
``tools/go/<name>/`` holding a go.mod and a main.go, built as ``bin/<name>``. The bin dir
is outside the repository so that a fresh clone on the same machine (CI's) reuses the
previous build. Each module has a stamp keyed on everything its binaries depend on (its
pins, its files, this script, the Go version); a module whose stamp matches and whose
binaries exist is skipped. Go's own caches stay at their defaults so a rebuild is fast.

Standard library only (Python >= 3.11 for tomllib): it runs before the virtualenv exists.

    python3 tools/build.py            build what is out of date, print what it did
    python3 tools/build.py --update   rewrite each module's go.mod/go.sum from the pins
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PINS = HERE / "versions.toml"

# Debian's binaries for the floor of the matrix; obs_iac/toolchain.py finds them.
FLOOR = {
    "prometheus": ("prometheus",),
    "promtool": ("promtool",),
    "alertmanager": ("prometheus-alertmanager", "alertmanager"),
    "amtool": ("amtool",),
}
FLOOR_HINT = "apt-get install prometheus prometheus-alertmanager"


@dataclass(frozen=True)
class Unit:
    """One Go module of ours and the binaries built from it."""

    name: str
    dir: Path
    binaries: tuple[str, ...]
    packages: tuple[str, ...]
    release: str | None
    version_package: str | None
    modules: dict[str, str]
    tags: tuple[str, ...] = ()
    ui_placeholder: tuple[str, ...] = ()


def tools_dir() -> Path:
    env = os.environ.get("OBS_IAC_TOOLS_DIR")
    return Path(env) if env else Path.home() / ".cache" / "obs-iac" / "tools"


def load_units() -> list[Unit]:
    pins = tomllib.loads(PINS.read_text(encoding="utf-8"))
    units: list[Unit] = []
    claimed: set[Path] = set()
    for name, table in pins.items():
        if "dir" not in table:
            continue  # [floor]: versions a program may require, not a module of ours
        unit_dir = (HERE / table["dir"]).resolve()
        claimed.add(unit_dir)
        units.append(
            Unit(
                name=name,
                dir=unit_dir,
                binaries=tuple(table["binaries"]),
                packages=tuple(table["packages"]),
                release=table["release"],
                version_package=table.get("version_package"),
                modules=dict(table.get("modules", {})),
                tags=tuple(table.get("tags", ())),
                ui_placeholder=tuple(table.get("ui_placeholder", ())),
            )
        )
    # The generic rule: tools/go/<name>/ with go.mod + main.go is the program <name>.
    go_root = HERE / "go"
    if go_root.is_dir():
        for sub in sorted(go_root.iterdir()):
            if sub.resolve() in claimed:
                continue
            if (sub / "go.mod").is_file() and (sub / "main.go").is_file():
                units.append(Unit(sub.name, sub.resolve(), (sub.name,), (".",), None, None, {}))
    return units


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    # sum.golang.org is not reachable from these machines (only the module proxy is), so
    # the checksum database is off. Integrity comes from the committed go.sum instead:
    # with -mod=readonly every downloaded module is checked against it and a module that
    # go.sum lacks is an error, never silently added.
    env["GOSUMDB"] = "off"
    env["GOFLAGS"] = "-mod=readonly -trimpath -buildvcs=false"
    return env


def go_version() -> str:
    if shutil.which("go") is None:
        sys.exit(
            "make tools: `go` is not on PATH; install Go 1.26 or newer "
            "(the wrapper modules say `go 1.26`)"
        )
    return subprocess.run(
        ["go", "version"], check=True, capture_output=True, text=True, env=go_env()
    ).stdout.strip()


def requires(unit_dir: Path) -> dict[str, str]:
    """The modules ``unit_dir``/go.mod requires directly. Indirect ones are left out:
    Prometheus itself needs an older Alertmanager, the collector's Prometheus exporter an
    older Prometheus, and neither is a pin of ours."""
    out = subprocess.run(
        ["go", "mod", "edit", "-json"],
        cwd=unit_dir,
        check=True,
        capture_output=True,
        text=True,
        env=go_env(),
    ).stdout
    return {
        r["Path"]: r["Version"]
        for r in json.loads(out).get("Require") or []
        if not r.get("Indirect")
    }


def floor_modules() -> dict[str, str]:
    pins = tomllib.loads(PINS.read_text(encoding="utf-8"))
    return dict(pins.get("floor", {}).get("modules", {}))


def check_pins(units: list[Unit]) -> None:
    """Every go.mod under tools/ must require each pinned module at its pinned version
    (a program of tools/go/ may instead require the floor's version, from [floor])."""
    pinned: dict[str, str] = {}
    for unit in units:
        pinned.update(unit.modules)
    floor = floor_modules()
    errors: list[str] = []
    for unit in units:
        have = requires(unit.dir)
        for module, version in unit.modules.items():
            if have.get(module) != version:
                errors.append(
                    f"{unit.dir.relative_to(HERE.parent)}/go.mod requires {module} "
                    f"{have.get(module, '(nothing)')}, versions.toml pins {version}"
                )
        for module, version in have.items():
            if module in pinned and version not in (pinned[module], floor.get(module)):
                allowed = pinned[module] + (f" (floor: {floor[module]})" if module in floor else "")
                errors.append(
                    f"{unit.dir.relative_to(HERE.parent)}/go.mod requires {module} "
                    f"{version}, versions.toml pins {allowed}"
                )
    if errors:
        sys.exit(
            "make tools: the pins disagree:\n  "
            + "\n  ".join(errors)
            + "\n  help: run `python3 tools/build.py --update` to rewrite go.mod/go.sum"
        )


def stamp_key(unit: Unit, go: str) -> str:
    digest = hashlib.sha256()
    digest.update(go.encode())
    digest.update(Path(__file__).read_bytes())
    digest.update(
        json.dumps(
            [
                unit.binaries,
                unit.packages,
                unit.release,
                unit.version_package,
                unit.modules,
                unit.tags,
                unit.ui_placeholder,
            ],
            sort_keys=True,
        ).encode()
    )
    for path in sorted(unit.dir.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(unit.dir)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def ldflags(unit: Unit) -> str:
    flags = ["-s", "-w"]
    if unit.release and unit.version_package == "main":
        flags.append(f"-X main.version={unit.release}")
    elif unit.release and unit.version_package:
        # What `--version` prints (prometheus/common/version); `go build` of a dependency's
        # command leaves these empty, and obs_iac.toolchain checks the release against it.
        pkg = unit.version_package
        revision = ",".join(unit.modules.values())
        flags += [
            f"-X {pkg}.Version={unit.release}",
            f"-X {pkg}.Revision={revision}",
            f"-X {pkg}.Branch=module-proxy",
            f"-X {pkg}.BuildUser=obs-iac-make-tools",
        ]
    return " ".join(flags)


PLACEHOLDER_PAGE = (
    "<!doctype html><title>UI not built</title><p>This binary was built by obs-iac's "
    "`make tools` without its web UI, which upstream builds with npm. The HTTP API is "
    "complete.\n"
)


def placeholder_modfile(unit: Unit, staging: Path) -> Path:
    """A go.mod that builds the pinned module from a copy holding placeholder pages.

    Alertmanager's ui/web.go embeds ui/app/dist, which upstream builds with npm and which
    its module zip lacks, so `go build` of the module fails ("pattern app/dist: no matching
    files found"); `go build -overlay` may not add files under GOMODCACHE. The copy is made
    from the module cache after `go mod download` has checked it against our go.sum.
    """
    module, version = next(iter(unit.modules.items()))
    info = json.loads(
        subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@{version}"],
            cwd=unit.dir,
            check=True,
            capture_output=True,
            text=True,
            env=go_env(),
        ).stdout
    )
    copy = staging / "src" / f"{module.rsplit('/', 1)[-1]}@{version}"
    shutil.copytree(info["Dir"], copy)
    for directory, _, files in os.walk(copy):
        os.chmod(directory, 0o755)  # the module cache is read-only
        for name in files:
            os.chmod(os.path.join(directory, name), 0o644)
    for relative in unit.ui_placeholder:
        page = copy / relative
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(PLACEHOLDER_PAGE, encoding="utf-8")
    modfile = staging / "go.mod"
    text = (unit.dir / "go.mod").read_text(encoding="utf-8")
    modfile.write_text(text + f"\nreplace {module} => {copy}\n", encoding="utf-8")
    shutil.copyfile(unit.dir / "go.sum", staging / "go.sum")
    return modfile


def build(unit: Unit, bin_dir: Path) -> None:
    staging = bin_dir.parent / f"staging-{unit.name}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    out = staging / "bin"
    out.mkdir()
    try:
        cmd = ["go", "build", "-ldflags", ldflags(unit)]
        if unit.ui_placeholder:
            cmd.append(f"-modfile={placeholder_modfile(unit, staging)}")
        if unit.tags:
            cmd += ["-tags", ",".join(unit.tags)]
        if unit.packages == (".",):
            cmd += ["-o", str(out / unit.binaries[0]), "."]
        else:
            cmd += ["-o", str(out) + "/", *unit.packages]
        subprocess.run(cmd, cwd=unit.dir, check=True, env=go_env())
        for binary in unit.binaries:
            # Replace, never overwrite in place: a test running the old binary keeps it.
            os.replace(out / binary, bin_dir / binary)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def first_line(binary: Path) -> str:
    try:
        proc = subprocess.run(
            [str(binary), "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError as exc:
        return f"cannot run: {exc}"
    text = (proc.stdout or proc.stderr).strip()
    return text.splitlines()[0] if text else f"exit {proc.returncode}, no output"


def report_floor() -> None:
    missing: list[str] = []
    for name, candidates in FLOOR.items():
        found = next(
            (
                p
                for c in candidates
                for p in (shutil.which(c), f"/usr/bin/{c}")
                if p and os.access(p, os.X_OK)
            ),
            None,
        )
        if found is None:
            missing.append(name)
            print(f"  floor {name}: not found")
        else:
            print(f"  floor {name}: {found}: {first_line(Path(found))}")
    if missing:
        print(
            f"make tools: Debian's floor tools are missing ({', '.join(missing)}): "
            f"as root, `{FLOOR_HINT}`"
        )


def update(units: list[Unit]) -> None:
    pinned: dict[str, str] = {}
    for unit in units:
        pinned.update(unit.modules)
    env = go_env()
    env["GOFLAGS"] = "-mod=mod"
    for unit in units:
        wanted = dict(unit.modules)
        floor = floor_modules()
        for module, version in requires(unit.dir).items():
            if module in pinned and version != floor.get(module):
                wanted.setdefault(module, pinned[module])
        if wanted:
            args = [f"{m}@{v}" for m, v in sorted(wanted.items())]
            subprocess.run(["go", "get", *args], cwd=unit.dir, check=True, env=env)
        subprocess.run(["go", "mod", "tidy"], cwd=unit.dir, check=True, env=env)
        print(f"updated {unit.dir.relative_to(HERE.parent)}/go.mod and go.sum")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="rewrite go.mod/go.sum from the pins")
    args = parser.parse_args()

    units = load_units()
    go = go_version()
    if args.update:
        update(units)
        return
    check_pins(units)

    root = tools_dir()
    bin_dir = root / "bin"
    stamps = root / "stamps"
    bin_dir.mkdir(parents=True, exist_ok=True)
    stamps.mkdir(parents=True, exist_ok=True)
    print(f"make tools: {go}; bin dir {bin_dir}")
    with open(root / ".lock", "w") as lock:
        # CI's clone and a developer's checkout may build at the same time.
        fcntl.flock(lock, fcntl.LOCK_EX)
        for unit in units:
            key = stamp_key(unit, go)
            stamp = stamps / f"{unit.name}.sha256"
            names = ", ".join(unit.binaries)
            pins = " ".join(f"{m}@{v}" for m, v in list(unit.modules.items())[:1])
            if len(unit.modules) > 1:
                pins += f" and {len(unit.modules) - 1} more modules of that release"
            have_all = all((bin_dir / b).is_file() for b in unit.binaries)
            if have_all and stamp.is_file() and stamp.read_text().strip() == key:
                print(f"  {names}: up to date")
                continue
            print(f"  {names}: building ({pins or 'no pins'}) ...", flush=True)
            started = time.monotonic()
            build(unit, bin_dir)
            stamp.write_text(key + "\n")
            print(f"  {names}: built in {time.monotonic() - started:.0f} s")
        # obs_iac.toolchain reads the pins here when it runs outside this repository.
        shutil.copyfile(PINS, root / "versions.toml")
    for unit in units:
        for binary in unit.binaries if unit.release else ():
            print(f"  current {binary}: {first_line(bin_dir / binary)}")
    report_floor()


if __name__ == "__main__":
    main()
