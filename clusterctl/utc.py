"""The product's timestamps: one form for a moment clusterctl records (undo journals, progress, locks, survey
and health reports, node annotations, the receiver's logs): UTC to the second, RFC 3339 with ``Z``
(``2026-12-06T20:44:49Z``, Kubernetes' own form), and UTC ``YYYYMMDD-HHMMSS`` in file names.

``epoch`` reads a stamp back, the forms earlier releases wrote included (``+00:00``; an undo journal's
local time with its offset, ``+0100``): what they left is ordered and aged by the moment it stands for.
"""

from __future__ import annotations

import time
from datetime import datetime

FORM = "%Y-%m-%dT%H:%M:%SZ"


def utc_stamp(now: float | None = None) -> str:
    """``now`` (default: this moment) in the product's one form."""
    return time.strftime(FORM, time.gmtime(now))


def file_stamp(now: float | None = None) -> str:
    """``now`` (default: this moment) in a file name: UTC, sorting as it reads."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))


def epoch(stamp: str) -> float | None:
    """The moment a stamp stands for, in seconds since the epoch; None when it is not one with its offset."""
    try:
        return datetime.strptime(stamp.strip(), "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except ValueError:
        return None
