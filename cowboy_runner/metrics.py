"""Prometheus metrics of the runner daemon (``[metrics] addr``; docs/runner.md "Metrics").

Per-job latency is broken into the stages of issue 6: assignment received → ack → execution start → execution
end → result included, each observed as the seconds since the assignment was received
(``cowboy_runner_job_stage_seconds{stage=…}``). A private registry per daemon keeps tests independent.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

STAGES = ("ack", "execution_start", "execution_end", "result_included")
"""Stages observed after ``assignment received`` (the clock's zero)."""
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class RunnerMetrics:
    """Every runner metric, registered in :attr:`registry`."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        """The registry served on the metrics port."""
        r = self.registry
        self.job_stage = Histogram("cowboy_runner_job_stage_seconds",
                                   "Seconds from assignment received to each job stage", ["stage"],
                                   buckets=_BUCKETS, registry=r)
        """Latency breakdown per stage (:data:`STAGES`)."""
        self.assignments = Counter("cowboy_runner_assignments_total", "Assignments by source and decision",
                                   ["source", "decision"], registry=r)
        """Assignments received (source push|poll; decision accepted|duplicate|reject_<reason>)."""
        self.executor_failures = Counter("cowboy_runner_executor_failures_total",
                                         "Failed executions by executor failure code", ["code"], registry=r)
        """Executor failures by stable code (docs/runner-executors.md)."""
        self.result_txs = Counter("cowboy_runner_result_txs_total", "Result transactions by kind and event",
                                  ["kind", "event"], registry=r)
        """Commit/reveal txs signed, sent as frames, rebroadcast over REST, included."""
        self.sessions_up = Gauge("cowboy_runner_sessions_up", "Authenticated validator sessions", registry=r)
        """Sessions currently authenticated."""
        self.reconnects = Counter("cowboy_runner_session_connects_total", "QUIC connection attempts that reached "
                                  "the validator (first connect included)", registry=r)
        """Connections made (a reconnect is every connect after the first)."""
        self.jobs_in_flight = Gauge("cowboy_runner_jobs_in_flight", "Jobs executing now", registry=r)
        """Executions in progress."""
        self.heartbeats = Counter("cowboy_runner_onchain_heartbeats_total", "On-chain heartbeats submitted",
                                  ["outcome"], registry=r)
        """RunnerHeartbeat submissions (ok|error)."""
        self.polls = Counter("cowboy_runner_polls_total", "Poll fallback requests by outcome", ["outcome"],
                             registry=r)
        """Poll fallback calls (ok|error|disabled)."""

        self.llm_requests = Counter("cowboy_runner_llm_requests_total", "LLM jobs by model and outcome",
                                    ["model", "outcome"], registry=r)
        """LLM executions by endpoint model name and outcome (``ok`` or the failure code)."""
        self.llm_tokens = Counter("cowboy_runner_llm_tokens_total", "LLM tokens reported by the endpoint",
                                  ["model", "kind"], registry=r)
        """Tokens the endpoint reported (kind prompt|completion), failed calls included."""
        self.llm_price = Counter("cowboy_runner_llm_price_total", "Price of successful LLM jobs at the runner's "
                                 "rate card (base_price + tokens x price_per_unit), smallest unit", ["model"],
                                 registry=r)
        """What the runner's ``[rate_card.llm]`` charges for its successful LLM jobs, per model."""

        self.executor_running = Gauge("cowboy_runner_executor_running", "Executions holding a slot, by job kind",
                                      ["kind"], registry=r)
        """Per-kind executions running (kinds with ``max_concurrent``)."""
        self.executor_waiting = Gauge("cowboy_runner_executor_queued", "Accepted jobs waiting for a slot, by job kind",
                                      ["kind"], registry=r)
        """Per-kind jobs queued for a slot."""

        self.executor_healthy = Gauge("cowboy_runner_executor_healthy", "1 when the job kind's executor passed its "
                                      "last health probe, else 0", ["kind"], registry=r)
        """Per-kind health (docs/runner-executors.md "Health")."""

    def llm_call(self, model: str, outcome: str, prompt_tokens: int, completion_tokens: int, price: int) -> None:
        """One LLM execution (``cowboy_runner.executors.llm.LlmObserver``)."""
        self.llm_requests.labels(model=model, outcome=outcome).inc()
        self.llm_tokens.labels(model=model, kind="prompt").inc(prompt_tokens)
        self.llm_tokens.labels(model=model, kind="completion").inc(completion_tokens)
        if price:
            self.llm_price.labels(model=model).inc(price)

    def stage(self, stage: str, seconds: float) -> None:
        """Observe ``seconds`` since the assignment was received for ``stage``."""
        self.job_stage.labels(stage=stage).observe(max(0.0, seconds))

    def serve(self, host: str, port: int) -> None:
        """Expose ``/metrics`` on ``host:port`` (a daemon thread of prometheus_client)."""
        start_http_server(port, addr=host, registry=self.registry)
