"""A deployment's Agent Card (pure): who it is, its skills, where and how to call it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)

PROTOCOL_VERSION = "1.0"
BEARER = "bearer"


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str


def agent_card(
    *,
    deployment: str,
    url: str,
    plugin: str,
    version: str,
    description: str,
    skills: Sequence[Skill],
    push_notifications: bool,
) -> AgentCard:
    """The card of one deployment: its plugin's skills, the JSON-RPC binding at `url`,
    and our bearer tokens as its one security scheme."""
    return AgentCard(
        name=deployment,
        description=description or f"{plugin} (opennua deployment {deployment})",
        version=version,
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION)
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=push_notifications),
        security_schemes={
            BEARER: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer",
                    description="an opennua API token (nua token create)",
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={BEARER: StringList(list=[])})],
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json", "application/octet-stream"],
        skills=[
            AgentSkill(id=s.name, name=s.name, description=s.description or s.name, tags=[plugin])
            for s in skills
        ]
        or [AgentSkill(id=plugin, name=plugin, description=description or plugin, tags=[plugin])],
    )
