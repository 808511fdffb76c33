"""A reviewer answers the agent's question from the desk: the options are the ones the
request offers (a free-form question is answered in words), the answer goes through
`opennua.client`, the desk shows who answered (the Host's `answered_by`), and a reviewer
who lost a first-writer-wins race is told who won."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from feedback_desk.provision import PLUGIN_DIR, publish
from feedback_desk.scripted_model import PLAN, PLAN_SCHEMA, QUESTION

from .conftest import Stack, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]


def _asking_plugin(stack: Stack, tmp_path: Path) -> None:
    """The feedback plugin, released with a person's approval required before the agent
    searches the desk's tickets: every dispatch waits for us once."""
    asking = tmp_path / "plugin-asking"
    shutil.copytree(PLUGIN_DIR, asking)
    with (asking / "opennua.toml").open("a") as toml:
        toml.write('approval-required = ["desk__search_tickets"]\n')  # under [access]
    publish(stack.nua, "1.1.0", asking)


def _waiting(stack: Stack, http: httpx.Client, ticket_id: str, revision: int) -> dict[str, Any]:
    def asked() -> dict[str, Any] | None:
        row = stack.wait_status(http, ticket_id, "waiting for us", revision)
        opened = [r for r in row["requests"].values() if r["status"] == "open"]
        return row | {"request": opened[0]} if opened else None

    return wait_for(asked, timeout=60, what=f"{ticket_id} r{revision}'s open request")


def _answer(
    http: httpx.Client, ticket_id: str, revision: int, rid: str, option: str, **kw: Any
) -> httpx.Response:
    form = {"revision": str(revision), "request_id": rid, "option_id": option}
    return http.post(f"/desk/{ticket_id}/answer", data=form, **kw)


def _say(http: httpx.Client, ticket_id: str, revision: int, rid: str, text: str) -> httpx.Response:
    """Answer a free-form question in words, as the page's text box or buttons send it."""
    form = {"revision": str(revision), "request_id": rid, "text": text}
    return http.post(f"/desk/{ticket_id}/answer", data=form)


def test_a_reviewer_answers_and_a_loser_is_told_who_won(stack: Stack, tmp_path: Path) -> None:
    _asking_plugin(stack, tmp_path)
    ticket_id = stack.submit("CSV export crash", "Export > CSV crashes on big reports.")[
        "ticket_id"
    ]
    html = {"accept": "text/html"}
    with stack.reviewer() as http, stack.opennua() as nua:
        http.post(f"/desk/{ticket_id}/dispatch")
        row = _waiting(stack, http, ticket_id, 1)
        rid = row["request"]["request_id"]
        offered = [o["option_id"] for o in row["request"]["options"]]
        assert {"allow_once", "reject_once"} <= set(offered), offered
        page = http.get(f"/desk/{ticket_id}", headers=html).text
        assert f'name="option_id" value="{offered[0]}"' in page, "the form offers the options"

        # Bad answers are refused as problems, before anything reaches the runtime.
        wrong = _answer(http, ticket_id, 1, rid, "maybe")
        assert (wrong.status_code, wrong.json()["code"]) == (422, "invalid_option")
        unknown = _answer(http, ticket_id, 1, "req_nope", "allow_once")
        assert (unknown.status_code, unknown.json()["code"]) == (404, "no_request")

        # Someone else (another client of the runtime) answers first: the reviewer loses.
        other = nua.post(
            f"/v1/sessions/{row['session_id']}/input-requests/{rid}/answer",
            json={"client_id": "cli_ops_console", "option_id": "allow_once"},
        )
        assert other.status_code == 200, other.text
        lost = _answer(http, ticket_id, 1, rid, "reject_once")
        assert lost.status_code == 409 and lost.json()["code"] == "already_answered"
        assert lost.json()["answered_by"]["client_id"] == "cli_ops_console"
        assert "cli_ops_console" in lost.json()["detail"], "the loser is told who won"
        lost_page = _answer(
            http, ticket_id, 1, rid, "reject_once", headers=html, follow_redirects=True
        )
        assert "Someone answered before you" in lost_page.text
        assert "cli_ops_console" in lost_page.text
        stack.wait_status(http, ticket_id, "draft ready")

        # The follow-up's dispatch asks again; this time the reviewer answers first.
        token = stack.db.ticket(ticket_id)["public_token"]  # type: ignore[index]
        with httpx.Client(base_url=stack.desk.url) as public:
            public.post(f"/t/{token}/reply", data={"body": "It also crashes for small ones."})
        http.post(f"/desk/{ticket_id}/dispatch")
        row = _waiting(stack, http, ticket_id, 2)
        rid = row["request"]["request_id"]
        won = _answer(http, ticket_id, 2, rid, "allow_once")
        assert won.status_code == 200, won.text
        assert won.json()["won"] is True
        install = stack.db.setting("install_id")
        desk_client = f"cli_desk{install}"
        assert won.json()["answered_by"]["client_id"] == desk_client
        assert won.json()["answered_by"]["on_behalf_of"] == "reviewer"
        # The Host's record is what the desk shows.
        state = nua.get(f"/v1/sessions/{row['session_id']}").json()["state"]
        host = state["turns"][-1]["input_requests"][rid]
        assert (host["option_id"], host["answered_by"]) == ("allow_once", won.json()["answered_by"])
        shown = http.get(f"/api/tickets/{ticket_id}").json()["dispatches"]
        mine = next(d for d in shown if d["revision"] == 2)["requests"][rid]
        assert mine["status"] == "resolved" and mine["answered_by"] == host["answered_by"]
        page = http.get(f"/desk/{ticket_id}", headers=html).text
        assert f"by reviewer ({desk_client})" in page
        assert "by cli_ops_console" in page or "(cli_ops_console)" in page
        stack.wait_status(http, ticket_id, "draft ready", 2)


def test_a_reviewer_answers_the_agents_question_in_words(stack: Stack) -> None:
    # `#ask-reviewer`: after searching, the agent asks the team with `ask_user` (no options).
    ticket_id = stack.submit("Billing page blank #ask-reviewer", "The billing page is empty.")[
        "ticket_id"
    ]
    html = {"accept": "text/html"}
    with stack.reviewer() as http, stack.opennua() as nua:
        http.post(f"/desk/{ticket_id}/dispatch")
        row = _waiting(stack, http, ticket_id, 1)
        rid, asked = row["request"]["request_id"], row["request"]
        assert asked["options"] == [] and asked["prompt"] == QUESTION, asked
        page = http.get(f"/desk/{ticket_id}", headers=html).text
        assert f'id="text-{rid}" name="text"' in page, "the form asks for words, not options"

        empty = _say(http, ticket_id, 1, rid, "  ")
        assert (empty.status_code, empty.json()["code"]) == (422, "empty_answer")
        assert _answer(http, ticket_id, 1, rid, "allow_once").json()["code"] == "empty_answer"

        said = "Enterprise plan; we moved billing to a new provider on Monday."
        won = _say(http, ticket_id, 1, rid, said)
        assert won.status_code == 200 and won.json()["won"] is True, won.text
        done = stack.wait_status(http, ticket_id, "draft ready")
        # The agent got the words: they are in its analysis.
        assert said in done["output"]["internal_analysis"], done["output"]
        # The Host's record is the desk's: the answer, and who gave it.
        state = nua.get(f"/v1/sessions/{row['session_id']}").json()["state"]
        host = state["turns"][-1]["input_requests"][rid]
        assert (host["outcome"], host["payload"]) == ("answered", said)
        mine = http.get(f"/api/tickets/{ticket_id}").json()["dispatches"][0]["requests"][rid]
        assert (mine["payload"], mine["answered_by"]) == (said, host["answered_by"])
        page = http.get(f"/desk/{ticket_id}", headers=html).text
        assert f"Answered “{said}” by reviewer" in page


def test_words_that_do_not_fit_the_questions_schema_are_refused_as_the_runtime_says(
    stack: Stack,
) -> None:
    # `#ask-plan`: the question comes with a response_schema (one of three plan names).
    ticket_id = stack.submit("Invoices missing #ask-plan", "No invoices this month.")["ticket_id"]
    with stack.reviewer() as http:
        http.post(f"/desk/{ticket_id}/dispatch")
        row = _waiting(stack, http, ticket_id, 1)
        rid = row["request"]["request_id"]
        assert row["request"]["prompt"] == PLAN
        # The schema lists its answers: the page offers them instead of a text box.
        assert row["request"]["choices"] == PLAN_SCHEMA["enum"]
        page = http.get(f"/desk/{ticket_id}", headers={"accept": "text/html"}).text
        assert 'name="text" value="enterprise"' in page and f'id="text-{rid}"' not in page
        refused = _say(http, ticket_id, 1, rid, "The big one")
        assert refused.status_code == 422, refused.text
        # The runtime's refusal, passed on (its code and why).
        assert refused.json()["code"] == "validation_error", refused.json()
        assert "enterprise" in refused.json()["detail"], refused.json()
        # Words not on offer (another client, or a form sent by hand) are the runtime's to
        # refuse. Nothing was answered: the question is still open, and a fitting answer wins.
        assert _waiting(stack, http, ticket_id, 1)["request"]["request_id"] == rid
        won = _say(http, ticket_id, 1, rid, "enterprise")
        assert won.status_code == 200 and won.json()["won"] is True, won.text
        done = stack.wait_status(http, ticket_id, "draft ready")
        assert "The team says: enterprise" in done["output"]["internal_analysis"]
