"""`web_fetch` without the egress proxy: a clear refusal, never a direct connection."""

from __future__ import annotations

import pytest

from opennua.runtime._errors import ToolError
from opennua.runtime._web import fetch


async def test_without_egress_web_fetch_refuses_and_says_how_to_allow_it() -> None:
    with pytest.raises(ToolError, match=r"allows no network.*--egress") as refused:
        await fetch(None, "https://example.org/")
    assert refused.value.code == "egress_denied"
