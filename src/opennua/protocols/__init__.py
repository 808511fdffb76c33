"""Standard agent protocols as clients of the Session Host: AG-UI (frontends), A2A
(agents calling agents) and ACP (editors). Each submodule maps its protocol's messages
onto our intents and our actions onto its events, with no store of its own: every fact
they show is derived from the session's log (docs/protocols.md).

Each protocol is a public submodule with its own `__all__`: `opennua.protocols.agui`,
`opennua.protocols.a2a`, `opennua.protocols.acp`. The server mounts the HTTP ones; the
CLI runs `nua acp`.
"""

__all__: list[str] = []
