"""Short memory ids in the client (service/client/call.py): a full id stays as it is, a unique prefix becomes its
memory's id, a prefix of several ids lists them, of none is a 404."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from service.client import AmbiguousId, ApiError
from service.client.call import first_id_with, id_prefix, pick


@dataclass
class Listed:
    id: str
    category: str = "preference"
    content: str = "x"


def test_a_prefix_is_resolved_among_the_listing_and_a_full_id_is_left_alone() -> None:
    full = "3f2a9c1d-0000-4000-8000-000000000001"
    assert id_prefix(full) is None and id_prefix("not-an-id!") is None
    assert id_prefix("3F2A-9C1D") == "3f2a9c1d"
    assert first_id_with("3f2a9c1d") == "3f2a9c1d-0000-0000-0000-000000000000"
    listed = [Listed(full), Listed("3f2a9c2e-0000-4000-8000-000000000002")]
    assert pick("3f2a9c1", "3f2a9c1", listed) == full
    with pytest.raises(AmbiguousId) as several:
        pick("3f2a9c", "3f2a9c", listed)
    assert several.value.code == "ambiguous_id" and full in several.value.detail and len(several.value.candidates) == 2
    with pytest.raises(ApiError) as none:
        pick("3f2b", "3f2b", listed)
    assert none.value.status == 404
