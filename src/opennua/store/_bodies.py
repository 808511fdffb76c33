"""How the store keeps an action body: raw DEFLATE against a preset dictionary.

An action body is a few hundred bytes of JSON whose keys, id prefixes and envelope
repeat in every row: compressed on its own, such a short text barely shrinks, but primed
with a dictionary of that vocabulary it shrinks by about two thirds (a tool call's
`tool_call.started` 318 -> 116 bytes; with a 300-character hex output,
`tool_call.updated` 621 -> 282). Bodies were most of what a durable runtime step
stored, on either backend (docs/store.md, "Action bodies are deflated").

A stored body is either JSON text (rows written before this format: TEXT on SQLite, on
PostgreSQL the text's UTF-8 bytes since its column became BYTEA) or bytes whose first byte
names the dictionary they were written with. A dictionary can never change once rows use
it: a new one gets a new tag and this module keeps reading the old. PostgreSQL assigns a
seq inside its append function, so its packed bodies hold 0 for the seq and a read puts
the row's back (`action_from_row`).
"""

from __future__ import annotations

import zlib

from ._errors import StoreError

# Never edit: rows written with tag 1 decode only against exactly these bytes. DEFLATE
# codes a nearer match in fewer bits, so the most common text comes last.
_DICT_1 = (
    b'"type":"text","text":"'
    b'"type":"resource_link","uri":"'
    b'"entries":[{"id":"plan_01","content":"","status":"pending","priority":"medium"},'
    b'"request_id":"req_01","reason":"tool_call","prompt":"","options":[{"option_id":'
    b'"allow_once","name":"Allow once","kind":"allow_once"},{"option_id":"reject_once",'
    b'"name":"Reject","kind":"reject_once"}],"response_schema":null,"expires_at":null'
    b'"outcome":"selected","option_id":"allow_once","payload":null,"answered_by":'
    b'{"client_id":"cli_01","principal_id":"prn_01"}'
    b'"worker_run_id":"run_01","parent_run_id":"run_01","parent_tool_call_id":"call_01",'
    b'"name":"","task":"'
    b'"artifact_id":"art_01","name":"","media_type":"text/markdown","size":,"sha256":"'
    b'"path":"","change":"modified","tool_call_id":"call_01","diff_ref":null'
    b'"execution_id":"exe_01","trigger":{"kind":"message","principal_id":"prn_01",'
    b'"client_id":"cli_01","source":null},"input":[{"type":"text","text":""}],'
    b'"message_id":"msg_01","retry_of":null,"trace_id":"'
    b'"attempt":1,"attempt_id":"att_01","supervisor_id":"","resumed_from_checkpoint":false'
    b'"state":"running","attempt":1}'
    b'"stop_reason":"end_turn","error":null}'
    b'"status":"failed","output":null,"output_ref":null,"error":{"code":"","message":"'
    b'"provider":"","model":"","input_tokens":0,"output_tokens":0,'
    b'"cache_read_input_tokens":0,"cache_creation_input_tokens":0,'
    b'"reasoning_output_tokens":0}'
    b'"role":"assistant","content":[{"type":"text","text":"'
    b'"message_id":"msg_01","role":"assistant"}'
    b'"text":"","status":"complete"}'
    b'"message_id":"msg_01","delta":"'
    b'"tool_call_id":"call_01","name":"","title":"","kind":"other","input":{"'
    b'"tool_call_id":"call_01","status":"in_progress","output":null,"output_ref":null,'
    b'"error":null},"seq":'
    b'"tool_call_id":"call_01","status":"completed","output":"'
    b'","output_ref":null,"error":null},"seq":'
    b'{"v":1,"session_id":0,"id":0,"type":0,"ts":"2026-01-01T00:00:00.000Z",'
    b'"turn_id":"trn_01","run_id":"run_01","client_id":null,"intent_id":null,"data":{"'
)
_TAG_1 = 1
# A 4 KiB window (the dictionary fits in it) and a small hash table: a fresh compressor
# with the default 32 KiB window costs ~100 us to set up; copying this primed one, ~2 us.
_WBITS = -12
_COMPRESS_1 = zlib.compressobj(1, zlib.DEFLATED, _WBITS, 4, zlib.Z_DEFAULT_STRATEGY, _DICT_1)
_DECOMPRESS_1 = zlib.decompressobj(_WBITS, _DICT_1)


def pack(text: str) -> bytes:
    """The BLOB a body's JSON text is stored as: its tag, then the text deflated."""
    c = _COMPRESS_1.copy()
    return bytes((_TAG_1,)) + c.compress(text.encode()) + c.flush()


def unpack(stored: str | bytes) -> str | bytes:
    """The JSON text a stored body holds, whichever way it was written."""
    if isinstance(stored, str) or stored[:1] == b"{":
        return stored
    if not stored or stored[0] != _TAG_1:
        raise StoreError(f"stored body has unknown format {stored[:1]!r}")
    d = _DECOMPRESS_1.copy()
    try:
        # Without a max_length, decompress returns all it can: at the stream's end
        # (`eof`) there is nothing left for a flush.
        text = d.decompress(stored[1:])
    except zlib.error as exc:
        raise StoreError(f"stored body is damaged: {exc}") from exc
    if not d.eof:
        raise StoreError("stored body is truncated")
    return text
