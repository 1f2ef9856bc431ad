"""Money is written one way in the plan and its diff."""

from __future__ import annotations

import pytest

from pdctl.money import usd


@pytest.mark.parametrize(("amount", "text"), [
    (0, "$0.00"), (5.16, "$5.16"), (1234.5, "$1,234.50"), (-2.04, "-$2.04"),
    # An hourly price per GiB keeps two significant digits instead of rounding to $0.00.
    (0.00011, "$0.00011"), (0.005, "$0.0050"),
])
def test_dollars_with_cents_and_separators(amount, text):
    assert usd(amount) == text


def test_a_change_carries_its_sign():
    assert usd(2.04, sign=True) == "+$2.04" and usd(-1489.2, sign=True) == "-$1,489.20"
