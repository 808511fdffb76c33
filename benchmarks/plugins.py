"""Plugin registry: re-publish cost and session creation through a deployment.

    python benchmarks/plugins.py [--files 1000] [--mb 20] [--sessions 300]

1. Publish a plugin of 1,000 files (20 MB in all) over HTTP to an in-process server, as
   `nua plugin publish` does (ask which contents are missing, upload those, publish the
   listing); then change one file, bump the version and publish again. Reported: bytes
   uploaded and bytes added to the blob store by the re-publish, as a share of the
   plugin. Goal (issue 14): < 1 %.
2. Create sessions through `POST /v1/sessions` with `deployment` set to a deployment of
   that plugin, and without one (the built-in `default` deployment), alternating rounds.
   Goal: the rate through a deployment ≥ 0.9x the rate without.

Both on SQLite in a temporary directory. Prints figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._server import TOKEN, free_port, serving

from opennua.client import Client
from opennua.store import open_store

HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def plugin(files: int, total_bytes: int, version: str) -> dict[str, tuple[bytes, bool]]:
    size = total_bytes // files
    manifest = {"name": "big", "version": version, "description": "a large plugin"}
    out = {
        ".claude-plugin/plugin.json": (json.dumps(manifest).encode(), False),
        "AGENTS.md": (b"You are big.\n", False),
    }
    for n in range(files - len(out)):
        # Distinct, incompressible-looking content per file, deterministic per index.
        seed = n.to_bytes(4, "big")
        out[f"docs/part{n:04d}.txt"] = ((seed * (size // 4 + 1))[:size], False)
    return out


def blob_bytes(data: Path) -> int:
    objects = data / "blobs" / "blobs" / "sha256"  # open_store puts blobs under data_dir/blobs
    return sum(p.stat().st_size for p in objects.rglob("*") if p.is_file())


class Counting(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.uploaded = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and request.url.path == "/v1/plugin-files":
            self.uploaded += len(request.content)
        return await self.inner.handle_async_request(request)


async def republish(url: str, data: Path, files: int, total: int) -> None:
    transport = Counting()
    async with Client(url, token=TOKEN, transport=transport) as client:
        first = plugin(files, total, "1.0.0")
        size = sum(len(d) for d, _ in first.values())
        started = time.perf_counter()
        await client.publish_plugin(first)
        took = time.perf_counter() - started
        before_blobs, before_upload = blob_bytes(data), transport.uploaded
        second = dict(first)
        manifest = {"name": "big", "version": "1.0.1", "description": "a large plugin"}
        second[".claude-plugin/plugin.json"] = (json.dumps(manifest).encode(), False)
        second["docs/part0000.txt"] = (b"changed" + first["docs/part0000.txt"][0][7:], False)
        started = time.perf_counter()
        await client.publish_plugin(second)
        retook = time.perf_counter() - started
        stored = blob_bytes(data) - before_blobs
        uploaded = transport.uploaded - before_upload
    print(f"plugin: {files} files, {size / 1e6:.1f} MB")
    print(f"first publish: {took:.2f} s; re-publish with one file changed: {retook:.2f} s")
    print(
        f"re-publish stored {stored} bytes ({100 * stored / size:.3f} % of the plugin), "
        f"uploaded {uploaded} bytes ({100 * uploaded / size:.3f} %) — goal < 1 %"
    )


async def creation_rates(url: str, sessions: int, rounds: int = 3) -> None:
    async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=30) as http:
        await http.post("/v1/plugins/big/channels/stable/release", json={"version": "1.0.1"})
        spec = {"plugin": "big", "model": "scripted:demo"}
        assert (await http.put("/v1/deployments/big", json=spec)).status_code == 200
        rates: dict[str, list[float]] = {"default": [], "deployment": []}
        for _ in range(rounds):
            for case, body in (("default", {}), ("deployment", {"deployment": "big"})):
                started = time.perf_counter()
                for _ in range(sessions):
                    r = await http.post("/v1/sessions", json=body)
                    assert r.status_code == 201, r.text
                rates[case].append(sessions / (time.perf_counter() - started))
    best = {case: max(values) for case, values in rates.items()}
    print(
        f"session creation: without a deployment {best['default']:.0f}/s, through one "
        f"{best['deployment']:.0f}/s (best of {rounds} rounds of {sessions}) — ratio "
        f"{best['deployment'] / best['default']:.2f}x, goal ≥ 0.9x"
    )


async def main(files: int, mb: int, sessions: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        store = await open_store(f"sqlite:///{data}/nua.db", data_dir=data / "blobs")
        async with store:
            port = free_port()
            async with serving(store, port):
                url = f"http://127.0.0.1:{port}"
                await republish(url, data, files, mb * 1_000_000)
                await creation_rates(url, sessions)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--mb", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=300)
    args = parser.parse_args()
    os.environ.setdefault("NUA_MODEL", "scripted:demo")
    asyncio.run(main(args.files, args.mb, args.sessions))
