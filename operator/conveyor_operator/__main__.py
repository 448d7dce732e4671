"""``conveyor-operator``: run the operator (kopf, standalone: one replica, no peering).

Watches every namespace, or those in ``CONVEYOR_OPERATOR_WATCH_NAMESPACES``; serves
kopf's liveness probe on ``--liveness`` (default ``http://0.0.0.0:8080/healthz``) and the
operator's Prometheus metrics (:mod:`conveyor_operator.metrics`) on ``--metrics-port``
(``CONVEYOR_OPERATOR_METRICS_PORT``, default 8081; 0: none) at ``/metrics``. Its logs (and
the Events kopf posts from them) go through the driver's secret redaction
(:mod:`conveyor_operator.logs`).
"""

from __future__ import annotations

import argparse
import asyncio
import os

import kopf

from conveyor_operator.logs import configure_logging


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="conveyor-operator", description=__doc__.splitlines()[0])
    parser.add_argument("--liveness", default=os.environ.get("CONVEYOR_OPERATOR_LIVENESS",
                                                             "http://0.0.0.0:8080/healthz"))
    parser.add_argument("--log-level", default=os.environ.get("CONVEYOR_OPERATOR_LOG_LEVEL", "INFO"))
    parser.add_argument("--metrics-port", type=int,
                        default=int(os.environ.get("CONVEYOR_OPERATOR_METRICS_PORT") or 8081))
    args = parser.parse_args(argv)
    configure_logging(args.log_level)  # secrets redacted, as in the driver's logs

    # After the logging set-up: importing the handlers registers them with kopf.
    from conveyor_operator import handlers, metrics  # noqa: F401
    from conveyor_operator.settings import OperatorSettings

    if args.metrics_port:
        metrics.serve(args.metrics_port)

    namespaces = OperatorSettings.from_env().watch_namespaces
    asyncio.run(kopf.operator(
        standalone=True,
        clusterwide=not namespaces,
        namespaces=namespaces,
        liveness_endpoint=args.liveness or None,
    ))


if __name__ == "__main__":
    main()
