"""A serve level's load (:class:`accelbench.scenarios.serve.load.Load`): its constructors and checks, and what the
case keys, the rows and the SLO search ask of it, against values written out by hand (keys are how stored runs
resume: they must not drift)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from accelbench.core.errors import ConfigError
from accelbench.scenarios.serve import Serve, ServeExtras, ServeSettings, level_loads
from accelbench.scenarios.serve.load import Load, run_level


def test_constructors_build_the_two_kinds():
    closed = Load.closed(8)
    assert closed == Load(concurrency=8)
    assert (closed.is_open, closed.value, closed.limit, closed.integer, closed.column) == (
        False,
        8,
        8,
        True,
        "concurrency",
    )
    opened = Load.open(2.5, arrival="gamma", burstiness=0.5, cap=4)
    assert opened == Load(rate_per_s=2.5, arrival="gamma", burstiness=0.5, max_concurrency=4)
    assert (opened.is_open, opened.value, opened.limit, opened.integer, opened.column) == (
        True,
        2.5,
        4,
        False,
        "request_rate_per_s",
    )
    assert Load.open(2.5).limit is None  # no cap: no limit on the requests in flight
    assert (closed.label, opened.label, Load.open(0.25).label) == ("concurrency 8", "2.5 requests/s", "0.25 requests/s")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Load(), "invalid load None,None: allowed a concurrency (closed loop) or a request rate, not both"),
        (
            lambda: Load(concurrency=2, rate_per_s=1.0),
            "invalid load 2,1.0: allowed a concurrency (closed loop) or a request rate, not both",
        ),
        (lambda: Load.closed(0), "invalid concurrency 0: allowed an integer >= 1"),
        (lambda: Load.closed(2.5), "invalid concurrency 2.5: allowed an integer >= 1"),
        (
            lambda: Load(concurrency=2, max_concurrency=3),
            "invalid max_concurrency 3: allowed nothing with a concurrency (closed loop)",
        ),
        (lambda: Load.open(0), "invalid request rate 0: allowed a rate > 0 requests/s"),
        (lambda: Load.open(math.nan), "invalid request rate nan: allowed a rate > 0 requests/s"),
        (
            lambda: Load.open(1, arrival="possion"),
            "invalid arrival 'possion': allowed poisson, gamma (did you mean 'poisson'?)",
        ),
        (lambda: Load.open(1, burstiness=0), "invalid burstiness 0: allowed a gamma shape > 0"),
        (lambda: Load.open(1, cap=0), "invalid max_concurrency 0: allowed an integer >= 1"),
        (
            lambda: Load.open(math.inf).check_duration(10.0),
            "invalid request rate inf: allowed a finite rate when the level lasts a duration",
        ),
    ],
)
def test_a_bad_load_is_one_config_error_line(build, message):
    with pytest.raises(ConfigError) as err:
        build()
    assert str(err.value) == message


def test_an_infinite_rate_sends_all_at_once_when_the_level_has_no_duration():
    Load.open(math.inf).check_duration(None)  # no error: each request once, all due at 0
    Load.closed(4).check_duration(10.0)


def test_key_suffixes_are_the_stored_ones():
    assert [Load.closed(c).key_suffix() for c in (1, 8, 32)] == ["|c=1", "|c=8", "|c=32"]
    assert [Load.open(r).key_suffix() for r in (2.0, 2.5, 0.1, 1000.0)] == [
        "|rate=2",
        "|rate=2.5",
        "|rate=0.1",
        "|rate=1000",
    ]
    assert (Load.closed(8).search_key_suffix(), Load.open(2.0).search_key_suffix()) == ("|concurrency", "|rate")


def test_row_columns_of_each_kind():
    assert Load.closed(4).columns() == {
        "concurrency": 4,
        "request_rate_per_s": None,
        "arrival": None,
        "burstiness": None,
        "max_concurrency": None,
    }
    assert Load.open(2.0, cap=16).columns() == {  # Poisson: no burstiness column
        "concurrency": None,
        "request_rate_per_s": 2.0,
        "arrival": "poisson",
        "burstiness": None,
        "max_concurrency": 16,
    }
    assert Load.open(2.0, arrival="gamma", burstiness=0.5).columns() == {
        "concurrency": None,
        "request_rate_per_s": 2.0,
        "arrival": "gamma",
        "burstiness": 0.5,
        "max_concurrency": None,
    }


def test_with_value_keeps_the_kind_its_arrivals_and_cap():
    at = Load.closed(8).with_value(4.0)
    assert at == Load.closed(4) and type(at.concurrency) is int and at.key_suffix() == "|c=4"
    at = Load.open(8.0, arrival="gamma", burstiness=0.5, cap=3).with_value(3)
    assert at == Load.open(3.0, arrival="gamma", burstiness=0.5, cap=3) and type(at.rate_per_s) is float
    assert at.key_suffix() == "|rate=3"


def test_search_bounds_of_the_levels_given():
    assert Load.closed(8).search_bounds([8], 4) == (1, 8)  # one concurrency: searched from 1
    assert Load.closed(32).search_bounds([1, 8, 32], 4) == (1, 32)
    assert Load.open(4.0).search_bounds([4.0], 4) == (0.125, 4.0)  # one rate: from 4 / 2**5, the finest step
    assert Load.open(8.0).search_bounds([2.0, 8.0], 4) == (2.0, 8.0)


def test_extras_keep_their_two_fields_and_keys():
    gamma = ServeSettings(request_rates=(2.0,), arrival="gamma", burstiness=0.5, max_concurrency=4)
    ex = ServeExtras.of(Load.open(2.0, arrival="gamma", burstiness=0.5, cap=4))
    assert (ex.concurrency, ex.request_rate_per_s, ex.slo_search) == (None, 2.0, False)  # the row's fields
    assert ex.load(gamma) == Load.open(2.0, arrival="gamma", burstiness=0.5, cap=4)
    assert ex.load() == Load.open(2.0)  # no settings: the defaults
    assert ServeExtras(concurrency=8).load(gamma) == Load.closed(8)  # a closed loop takes no arrivals or cap
    assert [e.key_suffix() for e in (ServeExtras(concurrency=8), ex)] == ["|c=8", "|rate=2"]
    assert ServeExtras(concurrency=32, slo_search=True).key_suffix() == "|slo-search|concurrency"
    assert ServeExtras(request_rate_per_s=8.0, slo_search=True).key_suffix() == "|slo-search|rate"


def test_levels_are_built_from_the_settings_once():
    st = ServeSettings()
    assert level_loads(st, "cuda:0") == [Load.closed(1), Load.closed(8), Load.closed(32)]
    assert level_loads(st, "cpu") == [Load.closed(1), Load.closed(4)]
    rates = ServeSettings(request_rates=(2.0, 8.0), arrival="gamma", burstiness=2.0, max_concurrency=5)
    assert level_loads(rates, "cpu") == [Load.open(r, arrival="gamma", burstiness=2.0, cap=5) for r in (2.0, 8.0)]
    spec = SimpleNamespace(settings=ServeSettings(request_rates=(2.0, 8.0), slo="mlperf-server", slo_search=True))
    assert Serve().levels(spec, "cpu") == [ServeExtras(request_rate_per_s=8.0, slo_search=True)]
    spec = SimpleNamespace(settings=ServeSettings(concurrency=(2, 6)))
    assert Serve().levels(spec, "cpu") == [ServeExtras(concurrency=2), ServeExtras(concurrency=6)]


def test_run_level_refuses_no_requests_and_an_ambiguous_load_before_sending():
    with pytest.raises(ConfigError) as err:
        run_level(None, [], Load.closed(1))
    assert str(err.value) == "invalid requests 0: allowed at least one request"
    req = [SimpleNamespace(prompt="x", output_len=1, prompt_tokens=1)]
    with pytest.raises(ConfigError) as err:
        run_level(None, req, Load.closed(1), concurrency=2)
    assert str(err.value) == "invalid load 2,None: allowed a Load, or a concurrency or a request rate, not both"
    with pytest.raises(ConfigError) as err:
        run_level(None, req)
    assert str(err.value) == "invalid load None,None: allowed a concurrency (closed loop) or a request rate, not both"


def test_a_stored_rows_load_is_read_back():
    assert Load.of_row(Load.closed(8).columns()) == Load.closed(8)
    gamma = Load.open(2.5, arrival="gamma", burstiness=0.5, cap=4)
    assert Load.of_row(gamma.columns()) == gamma
    assert Load.of_row({"concurrency": 8.0, "request_rate_per_s": None}) == Load.closed(8)  # a number read as float
    assert Load.of_row({"request_rate_per_s": 2, "arrival": "poisson", "max_concurrency": 4.0}) == Load.open(2.0, cap=4)
    assert Load.of_row({"concurrency": None, "request_rate_per_s": None}) is None
    assert Load.of_row({"concurrency": 0}) is None  # no valid load: no point on a chart


def test_the_report_names_a_rows_load_as_before():
    from accelbench.report.serve import _load_text, load_of

    closed, opened = Load.closed(8).columns(), Load.open(2.5).columns()
    assert load_of(closed) == ("concurrency (requests in flight)", 8.0)
    assert load_of(opened) == ("request rate (requests/s)", 2.5)
    assert load_of({"model": "m"}) is None
    assert (_load_text(closed), _load_text(opened)) == ("concurrency 8", "2.5 requests/s")
