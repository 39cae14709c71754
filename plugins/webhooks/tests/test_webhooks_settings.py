"""Process settings of the delivery machinery."""

from __future__ import annotations

from dataclasses import replace

import pytest


@pytest.mark.parametrize(
    ("lease", "senders", "held"),
    # The last delivery queued waits for one 10 s attempt per round of senders: it must be sent well
    # within its lease, or another worker claims it again (a duplicate send).
    [(60.0, 16, 48), (45.0, 4, 8), (39.0, 4, 4), (2.0, 2, 2)],
)
def test_a_process_holds_as_many_claims_as_its_lease_allows(lease, senders, held):
    from trellis_webhooks.settings import DEFAULTS

    assert replace(DEFAULTS, lease_seconds=lease, senders=senders).claim_ahead == held
