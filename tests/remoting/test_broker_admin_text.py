"""The text forms the admin answers share with Java: Double.toString (fastjson writes doubles the same way),
MixAll.humanReadableByteCount, StoreStatsService.getFormatRuntime; expected strings as Java prints them."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.remoting.broker.admin import format_runtime
from rocketstore.remoting.broker.admin_bodies import human_bytes, java_double
from rocketstore.remoting.broker.stats import Rate, records_in


@pytest.mark.parametrize(
    "value, text",
    [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (0.25, "0.25"),
        (123.456, "123.456"),
        (1234567.0, "1234567.0"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),  # from 10^7 up Java goes to computerized scientific notation
        (12345678.0, "1.2345678E7"),
        (0.001, "0.001"),
        (0.0005, "5.0E-4"),  # below 10^-3 as well
        (-3e-7, "-3.0E-7"),
        (2.5e20, "2.5E20"),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
    ],
)
def test_java_double(value, text):
    assert java_double(value) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_java_double_reads_back(value):
    # Java's text parses back to the same double (Double.parseDouble accepts what toString writes)
    assert float(java_double(value).replace("E", "e")) == value


@pytest.mark.parametrize(
    "n, text",
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (3 * 1024**3 // 2, "1.5 GiB"),
     (10**12, "931.3 GiB")],
)  # fmt: skip
def test_human_bytes(n, text):
    assert human_bytes(n) == text


def test_format_runtime():
    assert format_runtime(0) == "[ 0 days, 0 hours, 0 minutes, 0 seconds ]"
    assert format_runtime(((1 * 24 + 2) * 60 + 3) * 60_000 + 4_999) == "[ 1 days, 2 hours, 3 minutes, 4 seconds ]"


def test_rate_over_a_window():
    r = Rate(horizon_s=600)
    r.add(0, 100.0)
    assert r.per_second(10) == 0.0  # one sample: no rate yet
    r.add(50, 105.0)
    assert r.per_second(10) == 10.0  # nothing 10 s old: from the oldest sample
    r.add(80, 125.0)
    assert r.per_second(10) == 30 / 20  # from t=105, the newest sample at least 10 s old
    assert r.per_second(60) == 80 / 25


def test_rate_forgets_samples_past_the_horizon():
    r = Rate(horizon_s=60)
    for t in range(0, 300, 10):
        r.add(t * 2, float(t))
    assert r.samples[0][0] >= 290 - 60 - 10  # one sample older than the horizon is kept as the base
    assert r.per_second(60) == 2.0


def test_records_in_counts_size_prefixed_records():
    body = (12).to_bytes(4, "big") + b"x" * 8 + (20).to_bytes(4, "big") + b"y" * 16
    assert records_in(body) == 2
    assert records_in(b"") == 0
