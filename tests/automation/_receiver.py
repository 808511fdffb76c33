"""A real HTTP receiver of subscription deliveries (a thread, a loopback port): it verifies
each request with the Standard Webhooks reference library, answers the statuses it is
told to in turn (then 200), and counts deliveries by `webhook-id` as a receiver that
dedupes would."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


@dataclass
class Received:
    webhook_id: str
    payload: dict[str, Any]
    verified: bool
    status: int
    #: The request's headers, lower-cased names.
    headers: dict[str, str] = field(default_factory=dict)
    #: `time.perf_counter()` when it arrived.
    at: float = field(default_factory=time.perf_counter)


@dataclass
class Receiver:
    url: str
    secret: str = ""
    #: Statuses to answer, in order; once empty, 200.
    answers: list[int] = field(default_factory=list)
    #: Seconds to take before answering (a slow receiver).
    delay: float = 0.0
    posts: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def delivered(self) -> dict[str, dict[str, Any]]:
        """Unique events answered 2xx, by webhook-id (what a deduping receiver keeps)."""
        with self.lock:
            return {p.webhook_id: p.payload for p in self.posts if 200 <= p.status < 300}

    def wait(self, check: Callable[[Receiver], bool], timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not check(self):
            if time.monotonic() > deadline:
                raise AssertionError(f"receiver timed out; got {self.posts}")
            time.sleep(0.05)


@contextlib.contextmanager
def receiving(port: int = 0) -> Iterator[Receiver]:
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the deliverer's pool reuses connections

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            time.sleep(receiver.delay)
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                Webhook(receiver.secret).verify(body, headers)
                verified = True
            except WebhookVerificationError:
                verified = False
            with receiver.lock:
                status = receiver.answers.pop(0) if receiver.answers else 200
                if not verified:
                    status = 401
                receiver.posts.append(
                    Received(
                        headers.get("webhook-id", ""), json.loads(body), verified, status, headers
                    )
                )
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    class Server(ThreadingHTTPServer):
        request_queue_size = 256  # the default 5 drops connections under load (1 s SYN retry)
        daemon_threads = True

    server = Server(("127.0.0.1", port), Handler)
    receiver = Receiver(url=f"http://127.0.0.1:{server.server_address[1]}/hooks/nua")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
