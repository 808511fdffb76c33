"""Prometheus metrics with a registry per app (tests and multiple apps never share state).

Counters the Supervisor also moves (claims, fenced writes, appended actions) live here so
that `nua serve` can hand the same `Metrics` to both; hub figures are read at scrape time.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from opennua.host import Hub


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.actions_appended = Counter(
            "nua_actions_appended", "Actions appended to session logs", registry=self.registry
        )
        self.claims = Counter(
            "nua_claims", "Executions claimed by supervisors", registry=self.registry
        )
        self.fenced_writes = Counter(
            "nua_fenced_writes", "Attempt writes rejected by the fence", registry=self.registry
        )
        self.intents = Counter(
            "nua_intents",
            "Client intents by type and result",
            ["intent", "result"],
            registry=self.registry,
        )
        self.webhooks = Counter(
            "nua_webhook_deliveries",
            "Webhook deliveries by result (accepted, replayed, bad_signature, invalid)",
            ["result"],
            registry=self.registry,
        )
        self.schedule_fires = Counter(
            "nua_schedule_fires", "Schedule slots fired", registry=self.registry
        )
        self.schedule_lag = Histogram(
            "nua_schedule_fire_lag_seconds",
            "How long after its slot a schedule fired",
            buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0),
            registry=self.registry,
        )
        self._hubs: list[Hub] = []
        self.registry.register(_HubCollector(self._hubs))

    def watch_hub(self, hub: Hub) -> None:
        if hub not in self._hubs:
            self._hubs.append(hub)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _HubCollector(Collector):
    def __init__(self, hubs: list[Hub]) -> None:
        self._hubs = hubs

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield GaugeMetricFamily(
            "nua_subscribers",
            "Live SSE/WebSocket subscribers",
            value=sum(h.subscriber_count for h in self._hubs),
        )
        yield CounterMetricFamily(
            "nua_lagging_drops",
            "Subscribers dropped for lagging (sent resync)",
            value=sum(h.stats.resyncs for h in self._hubs),
        )
        yield CounterMetricFamily(
            "nua_actions_delivered",
            "Action frames queued to subscribers",
            value=sum(h.stats.delivered for h in self._hubs),
        )
