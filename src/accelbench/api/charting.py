"""The profile's roofline charts drawn as each case finishes (``accelbench profile --charts DIR``)."""

from __future__ import annotations

from accelbench.core.errors import OK


def charting(store, ceilings, folder: str, on_case):
    """``on_case`` that first draws the roofline charts of each finished ``ok`` profile case into ``folder`` and
    puts their paths (or ``chart_error``) on its stored row and its record."""
    from pathlib import Path

    from accelbench.report.roofline import case_charts
    from accelbench.scenarios.profile.scenario import slug
    from accelbench.scenarios.profile.storage import kernel_rows

    def finished(i: int, n: int, case, rec) -> None:
        if rec is not None and rec.get("status") == OK and rec.get("case_id") is not None:
            cols = case_charts(rec, kernel_rows(store, rec["case_id"]), ceilings, Path(folder) / slug(case))
            store.update_case(rec["case_id"], cols)
            rec.update(cols)
        if on_case:
            on_case(i, n, case, rec)

    return finished
