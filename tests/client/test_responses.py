"""The client's answers are typed (`opennua.client.responses`): each TypedDict names the
keys the server sends — the same as the server's response model where there is one, and
what a real app answers where the route builds its JSON by hand."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

import httpx
import pytest
from pydantic import BaseModel

import opennua.server
from opennua.client import Client, responses
from tests.server._harness import TOKEN, environment


def _keys(typed: Any) -> tuple[frozenset[str], frozenset[str]]:
    return typed.__required_keys__, typed.__required_keys__ | typed.__optional_keys__


def _literals(annotation: Any) -> set[Any]:
    """The values a field's `Literal` (alone or in a union) allows; empty for other types."""
    if get_origin(annotation) is Literal:
        return set(get_args(annotation))
    return {value for arg in get_args(annotation) for value in _literals(arg)}


def _server_models() -> dict[str, type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for path in sorted(Path(opennua.server.__file__).parent.glob("_*.py")):
        module = importlib.import_module(f"opennua.server.{path.stem}")
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseModel):
                found.setdefault(name, value)
    return found


def test_a_type_named_like_a_server_model_has_its_fields() -> None:
    models = _server_models()
    mirrored = [name for name in responses.__all__ if name in models]
    assert len(mirrored) >= 20, mirrored
    for name in mirrored:
        fields = {f.alias or n for n, f in models[name].model_fields.items()}
        assert _keys(getattr(responses, name))[1] == fields, name
        hints = get_type_hints(getattr(responses, name))
        for n, f in models[name].model_fields.items():
            # A value the server may send that the client's type leaves out is a drift.
            assert _literals(hints[f.alias or n]) == _literals(f.annotation), (name, n)


def _has_the_keys(typed: Any, value: Any) -> None:
    required, every = _keys(typed)
    assert required <= set(value) <= every, (typed.__name__, sorted(value))


async def test_the_hand_built_answers_have_the_keys_their_types_name(tmp_path: Path) -> None:
    async with environment(f"sqlite:///{tmp_path}/nua.db", tmp_path) as env:
        transport = httpx.ASGITransport(app=env.app)
        async with Client("http://testserver", TOKEN, transport=transport) as client:
            me = await client.whoami()
            _has_the_keys(responses.WhoAmI, me)
            schedule = await client.create_schedule(
                {"name": "nightly", "cron": "0 3 * * *", "prompt": "Tidy up."}
            )
            _has_the_keys(responses.ScheduleWithRuns, schedule)
            [listed] = await client.schedules(runs=5)
            _has_the_keys(responses.ScheduleWithRuns, listed)
            assert listed["recent_runs"] == []
            _has_the_keys(responses.ScheduleDoc, await client.pause_schedule(listed["schedule_id"]))
            hook = await client.create_hook({"name": "ci", "prompt": "Look at {{ payload.x }}."})
            _has_the_keys(responses.HookCreated, hook)
            [listed_hook] = await client.hooks()
            _has_the_keys(responses.HookDoc, listed_hook)
            assert "secret" not in listed_hook
            subscription = await client.create_subscription(
                {"url": "https://example.org/hooks", "events": ["turn.ended"]}
            )
            _has_the_keys(responses.SubscriptionCreated, subscription)
            [listed_subscription] = await client.subscriptions()
            _has_the_keys(responses.SubscriptionDoc, listed_subscription)
            assert "secret" not in listed_subscription
            sid = subscription["subscription_id"]
            _has_the_keys(responses.SubscriptionDoc, await client.subscription(sid))
            assert await client.subscription_deliveries(sid) == []
            usage = await client.usage("model")
            _has_the_keys(responses.UsageDoc, usage)


@pytest.mark.slow
def test_the_wheel_says_it_is_typed(tmp_path: Path) -> None:
    """PEP 561: `py.typed` ships, so a caller's type checker reads these types."""
    root = Path(__file__).parents[2]
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(root), "-w", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("opennua-*.whl")
    assert "opennua/py.typed" in zipfile.ZipFile(wheel).namelist()
