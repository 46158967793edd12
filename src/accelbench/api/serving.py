"""``accelbench serve`` as a function: the serve sweep with its launched server around it."""

from __future__ import annotations

from pathlib import Path

from accelbench.api.results import RunResult


def serve(spec, store, *, resume: bool = False, on_case=None, on_row=None, name=None, tags=None) -> RunResult:
    """``accelbench serve``: an OpenAI-compatible server under load (``spec.scenario == "serve"``). A server the spec
    launches (``launch``, ``engine``) is started before the cases and stopped at their end, on Ctrl-C and on error
    (:mod:`accelbench.launchers.server`); keywords as :func:`accelbench.api.sweep`.

    Raises:
        LaunchError: the launched server exited or did not answer in time (exit 2, the tail of its log).
        ServerError: a server given by URL does not answer as an OpenAI-compatible server (exit 2).
    """
    from accelbench import scenarios
    from accelbench.core.runlabel import run_label
    from accelbench.launchers import INLINE
    from accelbench.launchers.server import for_spec, launched
    from accelbench.sweep import loop

    label = run_label(name, tags)
    with launched(for_spec(spec, Path(store.path), label.name)) as launcher:
        out = loop.run(
            scenarios.get(spec.scenario),
            spec,
            store,
            launcher=launcher or INLINE,
            resume=resume,
            on_case=on_case,
            on_row=on_row,
            label=label,
        )
    return RunResult.of(out, store)
