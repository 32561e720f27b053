"""The web console and the HTTP port of `rocketstore serve` (and of `rocketstore console STORE`): /metrics in
Prometheus' format and the pages operators open rocketmq-dashboard for (overview, topics, consumer groups,
messages, health). Ranked with the protocol adapters; it imports neither of them: what it needs from them
(connected clients, in-flight messages, offset resets) comes through source.Hooks, filled in by the wiring."""
