"""What a command that ran cases prints at its end: the table, the weights, the cheapest precision, the OOM
boundary and the notes (failed cases one line each, flagged cases grouped per reason)."""

from __future__ import annotations

from rich.text import Text

from accelbench.cli.terminal import console, err_console, print_table, styled
from accelbench.core import kinds


def progress_bar():
    """The sweep progress bar: case, bar, done/total, elapsed and remaining time (from the cases so far)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )


def run_with_progress(fn, *args, **kwargs):
    """Call ``fn(*args, on_case=..., **kwargs)`` under the progress bar, naming the running case and the stage it is
    in (:mod:`accelbench.core.stage`: a 70B model's compile is minutes of one stage)."""
    from accelbench.core import stage
    from accelbench.report.table import case_label

    labels: dict[str, str] = {}  # case key -> its label, for the stages
    with progress_bar() as progress:
        task = progress.add_task("checking the models and data", total=None)

        def on_case(i: int, n: int, case, rec) -> None:
            label = (
                case_label(
                    {"model": case.model, "batch_size": case.batch_size, "precision": case.precision, "mode": case.mode}
                )
                if case.model
                else case.key
            )
            labels[case.key] = label
            progress.update(task, total=n, completed=i, description=label)

        def on_stage(where: stage.Where) -> None:
            progress.update(task, description=stage_label(where, labels))

        with stage.listening(on_stage):
            return fn(*args, on_case=on_case, **kwargs)


def stage_label(where, labels: dict[str, str]) -> str:
    """The progress bar's text for ``where`` (:class:`accelbench.core.stage.Where`): the case's label (from
    ``labels``, by case key; else the key; "start-up" outside a case) and its stage."""
    case = "start-up" if where.case is None else labels.get(where.case, where.case)
    return f"{case}: {where.stage}"


def print_outcome(store, run_id: int, *, wide: bool = False, resumed: int = 0, notes: list[str] = ()) -> None:
    """The run's table (compact unless ``wide``), the weights used, the OOM boundary, and notes naming each
    failed or flagged case."""
    from accelbench.report import table_for
    from accelbench.report.runs import oom_lines

    run = store.run(run_id)
    records = store.records(run_id)
    for note in notes:
        err_console.print(styled("warning:", "yellow", " " + note))
    if not records:
        console.print("no cases ran")
        return
    r0 = records[0]
    models = ", ".join(dict.fromkeys(str(r.get("model")) for r in records if isinstance(r.get("model"), str)))
    where = r0.get("device_name") or r0.get("device") or run["env"].get("device_name")
    data = r0.get("data_description") or r0.get("data")
    # above the table, not its title: a title wraps at the table's width
    console.print(
        f"Run {run_id} ({run['kind']}): {models + ' on ' if models else ''}{where}" + (f" | {data}" if data else "")
    )
    print_table(table_for(run["kind"])(records, compact=not wide), wide)
    if wide:
        print_ci_note(run["kind"], records)
    weights = {(str(r["model"]), str(r["weights"])) for r in records if isinstance(r.get("weights"), str)}
    why = {str(r["model"]): r["accuracy_note"] for r in records if isinstance(r.get("accuracy_note"), str)}
    for name, w in sorted(weights):
        plain = w != "random" or name in why
        console.print(
            f"{name}: weights {w}" + ("" if plain else " (random weights: accuracy not meaningful, not reported)")
        )
    for note in dict.fromkeys(why.values()):
        console.print(f"no accuracy: {note}")
    print_cheapest(run["kind"], records)
    if resumed:
        console.print(f"resumed run {run_id}: {resumed} cases were already done")
    for line in oom_lines(run["kind"], records):  # per batch-size series of the scenario (generate: + prompt, new)
        console.print(Text(line))
    print_notes(records, run["env"])


def print_cheapest(kind: str, records: list[dict]) -> None:
    """Under the table: per model, the cheapest precision meeting the scenario's quality target (an inference run's
    top-1 against fp32, a generate run's perplexity against its reference precision;
    :func:`accelbench.report.runs.quality_lines`)."""
    from accelbench.report.runs import quality_lines

    for line in quality_lines(kind, records):
        console.print(Text(line))


def print_ci_note(kind: str, records: list[dict]) -> None:
    """Under a wide inference or training table without intervals: how to get them."""
    if kind in kinds.SWEEP_KINDS and not any((r.get("windows") or 0) >= 2 for r in records):
        console.print("95% confidence intervals: needs --repeats >= 2 (one timed window per case)")


def print_notes(records: list[dict], env: dict | None = None, failures: bool = True) -> None:
    """Where power, energy and GPM figures came from; low-confidence energy; with ``failures``, why each case
    failed or was flagged (model and case named)."""
    from accelbench.report.table import case_notes, is_detail

    env = env or {}
    if env.get("idle_power_w") is not None:
        console.print(
            f"idle power {env['idle_power_w']:.1f} W ({env.get('idle_power_source')}, "
            f"{env.get('idle_window_s') or 0:.1f} s before the sweep)"
        )
    for key, label in (
        ("power_source", "power"),
        ("energy_source", "energy"),
        ("gpm_status", "GPM"),
        ("cpu_energy_source", "CPU energy"),
    ):
        vals = {r.get(key) for r in records if isinstance(r.get(key), str)}
        if vals:
            console.print(f"{label}: {', '.join(sorted(vals))}")
    low = [r for r in records if r.get("energy_confidence") == "low"]
    if low:
        console.print(
            styled(
                "note:",
                "yellow",
                f" energy of {len(low)} case(s) is low-confidence (window too short "
                "for the energy counter's update interval): raise --min-time-s",
            )
        )
    if not failures:
        return
    for label, text in case_notes(r for r in records if not is_detail(r)):
        style = "yellow" if label in ("flagged:", "unsupported:", "skipped:", "INVALID:") else "red"
        (err_console if label == "error:" else console).print(styled(label, style, " " + text))
