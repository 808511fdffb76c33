"""A hook's refused deliveries (docs/automation.md): newest first, the newest
`MAX_REFUSALS` kept by the write that adds one, gone with the hook. Every backend."""

from __future__ import annotations

from opennua.store import HookRecord, RefusalRecord, Store
from opennua.store._automation import MAX_REFUSALS


def _hook(hook_id: str) -> HookRecord:
    return HookRecord(
        hook_id=hook_id, workspace_id="wsp_1", name=hook_id, deployment="default",
        prompt="p", secret_name=f"hook-{hook_id}", max_bytes=1024, created_by="prn_1",
        created_at=1.0,
    )  # fmt: skip


async def test_a_hook_keeps_its_newest_refusals_and_loses_them_with_it(store: Store) -> None:
    await store.create_hook(_hook("hok_a"))
    await store.create_hook(_hook("hok_b"))
    for n in range(MAX_REFUSALS + 5):
        refusal = RefusalRecord(
            hook_id="hok_a", refused_at=1000.0 + n, code="bad_signature",
            delivery_id=f"msg_{n}", body_bytes=n,
        )  # fmt: skip
        await store.record_refusal(refusal)
    other = RefusalRecord(
        hook_id="hok_b", refused_at=1.0, code="invalid_payload", delivery_id=None, body_bytes=3
    )
    await store.record_refusal(other)
    kept = await store.list_refusals("hok_a", limit=1000)
    assert len(kept) == MAX_REFUSALS
    assert [kept[0].delivery_id, kept[-1].delivery_id] == [f"msg_{MAX_REFUSALS + 4}", "msg_5"]
    assert await store.list_refusals("hok_b") == [other]  # another hook's are its own
    assert len(await store.list_refusals("hok_a", limit=3)) == 3
    await store.delete_hook("hok_a")
    assert await store.list_refusals("hok_a") == []
    assert await store.list_refusals("hok_b") == [other]
