"""What a sweep needs installed, checked once before anything runs.

:func:`check` imports torch and torchvision and checks that the pair works (torchvision's C++ operators,
``torchvision::nms`` among them, are built against one torch: a CPU-only torch beside the registry's
CUDA torchvision loads none of them), then imports every optional package the spec needs (:func:`needs`):
timm for ``timm:`` models, MLPerf LoadGen for the ``loadgen`` scenario, the PT2E flow (torchao) for int8
through the torch backends, torchao's float8 for fp8 where the device runs it for real, what a backend
imports itself (onnxruntime, onnx), matplotlib for charts. Anything missing or broken is one line naming
the versions and the install command (:class:`accelbench.core.errors.InstallError`, exit 2), so an install
problem never turns into a row of errors per case. :func:`report` is the same check as a table
(``accelbench doctor``).

The extras named here are ``pyproject.toml``'s ``[project.optional-dependencies]`` (a test checks both agree).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from accelbench.core.errors import InstallError, install_command, one_line

# pip distribution -> (import name, extra that installs it; None: the base install)
PACKAGES: dict[str, tuple[str, str | None]] = {
    "torch": ("torch", None),
    "torchvision": ("torchvision", None),
    "matplotlib": ("matplotlib", None),
    "timm": ("timm", "timm"),
    "mlcommons-loadgen": ("mlperf_loadgen", "loadgen"),
    "torchao": ("torchao", "quant"),
    "onnxruntime": ("onnxruntime", "quant"),
    "onnx": ("onnx", "quant"),
    "transformers": ("transformers", "llm"),
    "pyarrow": ("pyarrow", "parquet"),
}
TORCH_INDEX = "https://download.pytorch.org/whl/"


@dataclass(frozen=True, kw_only=True, slots=True)
class Need:
    """One optional package a spec needs.

    Attributes:
        package: its pip distribution name (a key of :data:`PACKAGES`).
        why: what needs it, for the message (``timm:resnet18``, ``int8``, ``--modes onnxruntime``).
        probe: imports what is used (raises when it cannot); default: the package's import name.
    """

    package: str
    why: str
    probe: Callable[[], object] | None = None

    def run(self) -> None:
        if self.probe is not None:
            self.probe()
        else:
            importlib.import_module(PACKAGES[self.package][0])


def version(package: str) -> str | None:
    """The installed version of a pip distribution, or None (not installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version(package)
    except PackageNotFoundError:
        return None


def torch_pair() -> tuple[str, str]:
    """Import torch and torchvision and check that torchvision's C++ operators loaded for this torch.

    Returns:
        ``(torch version, torchvision version)``.
    Raises:
        InstallError: torch or torchvision does not import, or torchvision's operators are missing (the pair
            was built for different torch releases or CUDA versions; the message names both and the command
            that installs a matching pair from one index).
    """
    try:
        import torch
    except Exception as exc:
        raise InstallError(
            f"torch {version('torch') or '(not installed)'} cannot be imported ({one_line(exc)}): "
            f"{install_command('torch')}"
        ) from None
    cuda = torch.version.cuda
    fix = (
        f"install a matching pair from one index: pip install --force-reinstall torch torchvision "
        f"--index-url {TORCH_INDEX}{'cu' + cuda.replace('.', '') if cuda else 'cpu'}"
    )
    try:
        import torchvision  # noqa: F401

        torch.ops.torchvision.nms  # noqa: B018  (registered when torchvision's C++ library loaded)
    except Exception as exc:
        raise InstallError(
            f"torchvision {version('torchvision') or '(not installed)'} does not work with torch "
            f"{torch.__version__} ({one_line(exc)}): {fix}"
        ) from None
    return torch.__version__, version("torchvision") or torchvision.__version__


def _pt2e() -> None:
    from accelbench.quant import pt2e

    pt2e.api()


def _float8() -> None:
    from accelbench.quant import fp8

    if fp8.missing_reason():
        raise ImportError("torchao's float8 API is not importable")


def needs(scenario, spec, device) -> list[Need]:
    """The optional packages ``spec`` needs on ``device`` (a torch.device), in the order they are checked."""
    from accelbench import backends, precisions

    out = [Need(package="timm", why=m) for m in spec.models if m.startswith("timm:")][:1]
    out += [Need(package=package, why=why) for package, why in scenario.requires.items()]
    modes = [backends.mode(m) for m in spec.modes or ()]
    for mode in modes:
        out += [Need(package=p, why=f"--modes {mode.name}") for p in mode.requires]
    if scenario.quantizes and any(isinstance(m, backends.Backend) and m.torch_quantizer for m in modes):
        for name in spec.precisions:
            if precisions.quant_scheme(name) in ("static", "dynamic"):
                out.append(Need(package="torchao", why=name, probe=_pt2e))
            elif precisions.is_float8(name) and precisions.simulated_reason(name, device) is None:
                out.append(Need(package="torchao", why=name, probe=_float8))
    if getattr(spec.settings, "chart_dir", None):
        out.append(Need(package="matplotlib", why="--charts"))
    return out


def _missing(package: str, exc: Exception, why: str | None = None) -> str:
    """The one line of a package that failed to import: its state, what needs it, the install command."""
    have = version(package)
    if isinstance(exc, ImportError):
        state = "is not installed" if have is None else f"{have} is installed but does not import"
    else:
        state = f"{have + ' ' if have else ''}does not work ({one_line(exc)})"
    return f"{package} {state}: {f'{why} needs it: ' if why else ''}{install_command(package, PACKAGES[package][1])}"


def check(scenario, spec, device) -> None:
    """Before a run is opened: torch and torchvision work together and every package ``spec`` needs imports.

    Raises:
        InstallError: the first problem found, as one line naming the versions and the install command.
    """
    torch_pair()
    for need in needs(scenario, spec, device):
        try:
            need.run()
        except Exception as exc:
            raise InstallError(_missing(need.package, exc, need.why)) from None


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    """One line of :func:`report`.

    Attributes:
        package: the pip distribution; version: installed version (None: not installed).
        required: part of the base install (a sweep cannot run without it) rather than an extra.
        ok: it imports (and for torchvision: its operators loaded for this torch).
        note: what it is (base install / the extra) when ok, else the one line of what to do.
    """

    package: str
    version: str | None
    required: bool
    ok: bool
    note: str


def report() -> list[Row]:
    """Every package accelbench uses, installed or not: the torch pair first (:func:`torch_pair`), then each
    other package (imported)."""
    rows = []
    try:
        tv = torch_pair()
        rows += [
            Row(package="torch", version=tv[0], required=True, ok=True, note=_torch_note()),
            Row(
                package="torchvision",
                version=tv[1],
                required=True,
                ok=True,
                note="C++ operators loaded (torchvision::nms)",
            ),
        ]
    except InstallError as exc:
        rows += [
            Row(package="torch", version=version("torch"), required=True, ok=False, note=""),
            Row(package="torchvision", version=version("torchvision"), required=True, ok=False, note=str(exc)),
        ]
    for package, (module, extra) in PACKAGES.items():
        if package in ("torch", "torchvision"):
            continue
        why = f"extra [{extra}]" if extra else "the base install"
        try:
            importlib.import_module(module)
            rows.append(Row(package=package, version=version(package), required=extra is None, ok=True, note=why))
        except Exception as exc:
            rows.append(
                Row(
                    package=package,
                    version=version(package),
                    required=extra is None,
                    ok=False,
                    note=_missing(package, exc),
                )
            )
    return rows


def _torch_note() -> str:
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    build = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "CPU-only build"
    return f"{build}, {gpus} CUDA GPU{'s' * (gpus != 1)} visible"
