import opennua.store


def test_exported_names_are_pinned() -> None:
    assert sorted(opennua.store.__all__) == [
        "Artifact",
        "Attempt",
        "BlobCorrupted",
        "BlobRef",
        "BlobStore",
        "Checkpoint",
        "CheckpointRecord",
        "Claimed",
        "CommitUnknown",
        "Conflict",
        "Execution",
        "Fenced",
        "FencedTransaction",
        "Handle",
        "IdempotencyMismatch",
        "InFlight",
        "InputRequest",
        "InvalidInput",
        "Lease",
        "LedgerEntry",
        "Lost",
        "Mismatch",
        "New",
        "NotFound",
        "Page",
        "Replay",
        "SchemaTooNew",
        "Session",
        "Snapshot",
        "Store",
        "StoreError",
        "Transaction",
        "Unavailable",
        "Watcher",
        "Won",
        "open_store",
    ]
    for name in opennua.store.__all__:
        assert hasattr(opennua.store, name)


def test_errors_share_one_root_and_commit_unknown_counts_as_fenced() -> None:
    from opennua.store import CommitUnknown, Fenced, StoreError

    for name in opennua.store.__all__:
        obj = getattr(opennua.store, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, StoreError), name
    assert issubclass(CommitUnknown, Fenced)
