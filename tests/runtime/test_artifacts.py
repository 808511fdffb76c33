"""`publish_artifact` takes a file name and a media type a download header can carry: no
control characters, no path, at most 255 bytes; `type/subtype` with clean parameters."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from opennua.runtime import Completed, ToolContext, ToolError, default_agent
from opennua.runtime._builtins import publish_artifact
from opennua.runtime._tools import MemoryArtifacts
from opennua.runtime.testing import InMemoryJournal, ScriptedModel, ScriptStep, call, say
from tests.runtime.helpers import drive, make_loop


def _ctx(artifacts: MemoryArtifacts) -> ToolContext:
    return ToolContext(
        workdir=Path("."),
        run_id="run_x",
        tool_call_id="call_x",
        idempotency_key="call_x",
        artifacts=artifacts,
        cancel=asyncio.Event(),
    )


async def _publish(name: str, media_type: str = "text/markdown") -> tuple[str, ToolContext]:
    ctx = _ctx(MemoryArtifacts())
    return str(await publish_artifact.fn(ctx, name, "# hi", media_type)), ctx


@pytest.mark.parametrize(
    "name",
    [
        "report\r\nX-Injected: 1.md",
        "report\n.md",
        "nul\x00.md",
        "bell\x07.md",
        "del\x7f.md",
        "c1\x85.md",
        "\u202eevil.md",  # right-to-left override: shows another name than it is
        "line\u2028sep.md",
        "dir/report.md",
        "..\\report.md",
        ".",
        "..",
        "",
        "   ",
        "x" * 256,
        "é" * 128,  # 256 bytes in UTF-8
    ],
)
async def test_bad_names_are_refused(name: str) -> None:
    artifacts = MemoryArtifacts()
    ctx = _ctx(artifacts)
    with pytest.raises(ToolError) as err:
        await publish_artifact.fn(ctx, name, "# hi", "text/markdown")
    assert err.value.code == "tool_error"
    assert "\r" not in err.value.message and "\n" not in err.value.message
    assert artifacts.blobs == {} and ctx.reported == []  # nothing stored, nothing said


@pytest.mark.parametrize(
    "media_type",
    [
        "text",
        "text/",
        "/plain",
        "text/plain\r\nX-Injected: 1",
        "text/plain; charset=utf-8\r\n",
        "text/plain; charset",
        'text/plain; a="b\nc"',
        "tëxt/plain",
        "text/plain\x00",
        "text /plain",
    ],
)
async def test_bad_media_types_are_refused(media_type: str) -> None:
    with pytest.raises(ToolError, match="not a media type"):
        await _publish("report.md", media_type)


@pytest.mark.parametrize(
    ("name", "media_type"),
    [
        ("报告.md", "text/markdown"),
        ("report v2 (final).md", "text/plain; charset=utf-8"),
        ("x" * 255, 'text/plain; charset="utf-8"'),
        ("chart.svg", "image/svg+xml"),
        ("a.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    ],
)
async def test_good_names_and_types_are_published(name: str, media_type: str) -> None:
    text, ctx = await _publish(name, media_type)
    assert text.startswith(f"Published {name} (")
    (published,) = ctx.reported
    assert published.name == name and published.media_type == media_type  # type: ignore[attr-defined]


async def test_in_a_turn_the_model_is_told_and_the_turn_goes_on(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            ScriptStep(
                calls=(call("publish_artifact", name="a\r\nb.md", content="x", media_type="x"),)
            ),
            say("ok"),
        ]
    )
    outcome, journal, _ = await drive(
        lambda j: make_loop(default_agent("scripted:test"), j, tmp_path, model),
        InMemoryJournal(),
        "x",
    )
    assert isinstance(outcome, Completed)
    assert not [e for e in journal.log if e.type == "artifact.published"]
    result = [e.data for e in journal.log if e.type == "tool_call.updated"][-1]
    assert result.status == "failed" and "control characters" in result.error.message  # type: ignore[attr-defined]
