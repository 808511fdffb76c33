import opennua.store


def test_errors_share_one_root_and_commit_unknown_counts_as_fenced() -> None:
    from opennua.store import CommitUnknown, Fenced, StoreError

    for name in opennua.store.__all__:
        obj = getattr(opennua.store, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, StoreError), name
    assert issubclass(CommitUnknown, Fenced)
