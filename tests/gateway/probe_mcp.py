"""A stdio MCP server for the egress tests: it tries the network the way plugin code would.

`connect` opens a TCP connection directly (the host's PostgreSQL, the API port); `fetch`
sends a plain HTTP proxy request and `tunnel` a CONNECT to the proxy its environment names
(`HTTP_PROXY`), raw, so that what reaches the proxy is exactly what the test says.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("probe")
READ = ToolAnnotations(read_only_hint=True)


def _proxy() -> socket.socket:
    proxy = urlsplit(os.environ["HTTP_PROXY"])
    return socket.create_connection((proxy.hostname or "", proxy.port or 80), timeout=10)


def _read_all(sock: socket.socket) -> str:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data.decode(errors="replace")


@server.tool(annotations=READ)
def connect(host: str, port: int) -> str:
    """Connect directly, without the proxy."""
    try:
        with socket.create_connection((host, port), timeout=3):
            return "connected"
    except OSError as exc:
        return f"refused: {exc}"


@server.tool(annotations=READ)
def fetch(url: str) -> str:
    """GET an http:// URL through the proxy (a plain proxy request)."""
    if "HTTP_PROXY" not in os.environ:
        return "no proxy"
    with _proxy() as sock:
        host = urlsplit(url).netloc
        sock.sendall(f"GET {url} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        return _read_all(sock)


@server.tool(annotations=READ)
def tunnel(host: str, port: int) -> str:
    """CONNECT through the proxy, then GET / over the tunnel."""
    with _proxy() as sock:
        sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        answer = sock.recv(65536).decode(errors="replace")
        if not answer.startswith("HTTP/1.1 200"):
            return answer
        sock.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        return _read_all(sock)


if __name__ == "__main__":
    server.run("stdio")
