"""Money, written one way in every view: US dollars with cents and thousands separators ($1,234.56); an
amount under a cent (an hourly price per GiB) keeps two significant digits ($0.00011)."""

from __future__ import annotations

import math


def usd(amount: float, *, sign: bool = False) -> str:
    """`amount` dollars; `sign` writes + or - first (a change)."""
    prefix = ("+" if amount >= 0 else "-") if sign else ("-" if amount < 0 else "")
    size = abs(amount)
    digits = 1 - math.floor(math.log10(size)) if 0 < size < 0.01 else 2
    return f"{prefix}${size:,.{digits}f}"
