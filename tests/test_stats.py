import math

import numpy as np
import pytest
import torch

from accelbench.core.stats import stat_columns, summarize, topk_correct


def test_percentiles_are_numpy_linear():
    xs = [10.0, 1.0, 4.0, 7.0]  # sorted 1 4 7 10
    st = summarize(xs)
    assert st.latency_p50_ms == 5.5 and st.latency_iqr_ms == pytest.approx(7.75 - 3.25)
    assert st.latency_p90_ms == pytest.approx(9.1) and st.latency_p99_ms == pytest.approx(9.91)
    assert st.latency_p99_ms == pytest.approx(np.percentile(xs, 99)) and type(st.latency_p99_ms) is float
    with pytest.raises(ValueError):
        summarize([])


def test_summarize_exact():
    st = summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert st.latency_p50_ms == 3.0 and st.latency_mean_ms == 3.0
    assert st.latency_iqr_ms == 2.0 and st.spread == pytest.approx(2 / 3) and st.noisy
    flat = summarize([10.0] * 9 + [10.4])
    assert flat.spread == 0.0 and not flat.noisy and flat.latency_max_ms == 10.4
    assert math.isclose(flat.latency_p99_ms, 10.0 + 0.4 * 0.91)


def test_topk_correct():
    logits = torch.tensor([[0.1, 0.9, 0.0], [0.8, 0.1, 0.2], [0.3, 0.2, 0.5]])
    labels = torch.tensor([1, 2, 1])
    assert topk_correct(logits, labels, (1, 2)) == {1: 1, 2: 2}
    assert topk_correct(logits, labels, (1, 5)) == {1: 1, 5: 3}  # k capped at 3 classes


def test_stat_columns_prefix():
    cols = stat_columns(summarize([1.0, 2.0, 3.0, 4.0, 5.0]), "step_time")
    assert cols == {
        "step_time_mean_ms": 3.0,
        "step_time_min_ms": 1.0,
        "step_time_p50_ms": 3.0,
        "step_time_p90_ms": pytest.approx(4.6),
        "step_time_p99_ms": pytest.approx(4.96),
        "step_time_max_ms": 5.0,
        "step_time_spread": pytest.approx(2 / 3),
        "step_time_noisy": True,
    }
