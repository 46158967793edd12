"""The one "cheapest case meeting a target against a reference" search, in both directions of a metric."""

from __future__ import annotations

from accelbench.core.targets import Target, cheapest_meeting


def _rows(metric):
    return [
        {"model": "m", "precision": p, metric: v, "speed": s, "cost_per_1000_samples_usd": c}
        for p, v, s, c in (
            ("ref", 10.0, 100, None),
            ("a", 10.05, 200, None),
            ("b", 10.5, 900, None),
            ("c", 9.5, 50, None),
        )
    ]


def _ref(rows):
    return "ref", next(r for r in rows if r["precision"] == "ref")


def test_the_direction_decides_which_rows_meet_the_target():
    lower = Target(
        metric="ppl",
        higher_is_better=False,
        ratio=1.01,
        speed="speed",
        reference=lambda rows: ("ref", _ref(rows)[1]["ppl"]),
    )
    (got,) = cheapest_meeting(_rows("ppl"), lower)
    assert (got.reference, got.reference_value) == ("ref", 10.0)
    assert got.best["precision"] == "a" and (got.by, got.value) == ("speed", 200) and got.missed == ["b"]
    higher = Target(
        metric="top1",
        higher_is_better=True,
        ratio=0.99,
        speed="speed",
        reference=lambda rows: ("ref", _ref(rows)[1]["top1"]),
    )
    (got,) = cheapest_meeting(_rows("top1"), higher)
    assert got.best["precision"] == "b" and got.missed == ["c"]  # 10.5 >= 9.9; 9.5 misses


def test_cost_ranks_first_and_candidates_and_verdicts_are_the_callers():
    rows = _rows("ppl")
    rows[0]["cost_per_1000_samples_usd"], rows[3]["cost_per_1000_samples_usd"] = 0.5, 0.2
    target = Target(
        metric="ppl",
        higher_is_better=False,
        ratio=1.01,
        speed="speed",
        reference=lambda rs: ("ref", 10.0),
        candidate=lambda r: r["precision"] != "c",
    )
    (got,) = cheapest_meeting(rows, target)
    assert (got.best["precision"], got.by, got.value) == ("ref", "cost_per_1000_samples_usd", 0.5)
    rows[2]["ok"] = True  # its own verdict overrides the rule
    judged = Target(
        metric="ppl",
        higher_is_better=False,
        ratio=1.01,
        speed="speed",
        verdict="ok",
        reference=lambda rs: ("ref", 10.0),
    )
    assert cheapest_meeting(rows, judged)[0].missed == []
    none = Target(metric="ppl", higher_is_better=False, ratio=1.01, speed="speed", reference=lambda rs: None)
    assert cheapest_meeting(rows, none) == []  # no reference: no claim
