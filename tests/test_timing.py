"""The timed window (accelbench.core.timing): exact step counts and the order the items are fed in."""

from accelbench.core.timing import passes_needed, steps_needed, time_passes, time_steps, time_windows


def test_steps_needed_reaches_both_bounds_not_whole_passes():
    assert steps_needed(30, 0.5, 0.003) == 167  # 0.5 s at 3 ms a step: ceil(166.7)
    assert steps_needed(30, 0.5, 0.267) == 30  # 30 steps of 267 ms take 8 s > 0.5 s
    assert steps_needed(0, 0.0, 0.01) == 1  # at least one
    assert steps_needed(3, 0.5, 0.0) == 3  # no time per step measured: the count alone
    # the whole-pass rule it replaces: 1000 steps at batch 1 of 1000 images
    assert passes_needed(30, 0.5, 1000, 0.003) * 1000 == 1000


def test_time_steps_cycles_through_the_items():
    import torch

    seen = []
    lat, wall = time_steps(seen.append, ["a", "b", "c"], 7, torch.device("cpu"))
    assert seen == ["a", "b", "c", "a", "b", "c", "a"] and len(lat) == 7 and wall >= 0
    seen.clear()
    assert len(time_passes(seen.append, ["a", "b"], 2, torch.device("cpu"))[0]) == 4 and seen == ["a", "b"] * 2
    seen.clear()
    windows = time_windows(seen.append, ["a", "b", "c"], 2, torch.device("cpu"), repeats=3)
    assert [len(w[0]) for w in windows] == [2, 2, 2] and seen == ["a", "b"] * 3  # each window from the first
