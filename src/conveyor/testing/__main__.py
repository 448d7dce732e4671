"""Command line of the test harness.

``python -m conveyor.testing up [--kafka] [--postgres] [--kube] [--env-file PATH]``
    Start the components (Kafka and PostgreSQL when no flag is given; the Kubernetes control
    plane only with ``--kube``) in the foreground, print ``export CONVEYOR_POSTGRES_URL=...`` /
    ``export CONVEYOR_KAFKA_BOOTSTRAP=...`` / ``export CONVEYOR_KUBECONFIG=...`` lines on stdout
    as each becomes ready (everything else goes to stderr; with ``--env-file`` the same lines are
    also written to PATH atomically once all are up), and run until SIGTERM / SIGINT (Ctrl-C),
    then stop them.
    Exits 1 if a component cannot start or dies while running. Always starts fresh ones: the
    CONVEYOR_* variables of the calling environment are ignored.

``python -m conveyor.testing up --node [--env-file PATH]``
    The same for what the Kubernetes quickstart stands on (as root): a single-node Kubernetes
    where pods run (:mod:`conveyor.testing.node`), a Kafka broker and PostgreSQL on its IP, the
    Dockerfile's images built (cached) and imported, and the chart installed
    (:func:`conveyor.testing.chart.install_chart`); prints ``KUBECONFIG``, ``CONVEYOR_KUBECTL``,
    ``CONVEYOR_HELM``, ``CONVEYOR_KAFKA_BOOTSTRAP`` and ``CONVEYOR_POSTGRES_URL`` exports.

``python -m conveyor.testing resolve [--connect] [--s3] [--schema-registry] [--avro]``
    Resolve the Apache Kafka jars from Maven Central into the cache (what CI does up front) and
    print their directory; with ``--connect`` also the Apache Kafka Connect worker's jars
    (``conveyor.testing.connect``), printing their directory on the next line; with ``--s3``
    also S3Proxy's self-contained jar, the harness's S3 server (``conveyor.testing.s3``),
    printing its path on the next line; with ``--schema-registry`` also Apicurio Registry's
    distribution, the harness's Schema Registry (``conveyor.testing.schema_registry``), unpacked,
    printing its directory on the next line; with ``--avro`` also Apache Avro's Java library
    (``conveyor.testing.avro_java``, the archive's Avro files read by Avro itself) and avro-tools'
    jar, printing the library's directory and the jar's path on the next two lines. Fast when cached.

``python -m conveyor.testing images [--target runtime|operator ...]``
    Build the Dockerfile's images on a Debian base with buildah (``conveyor.testing.images``; as
    root, ``apt-get install buildah debootstrap``), or find them in the cache, and print one line
    per image on stdout: ``<ref> <docker-archive path> <size in bytes>``. Exits 1 if they cannot
    be built.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from conveyor.testing.errors import ComponentUnavailable


class _Stop(BaseException):
    """Raised from the signal handler; a BaseException so no `except Exception` swallows it."""


def _raise_stop(signum, frame):
    raise _Stop(signal.Signals(signum).name)


def _up(args: argparse.Namespace) -> int:
    none = not (args.kafka or args.postgres or args.kube or args.node)
    want_kafka = (args.kafka or none) and not args.node
    want_pg = (args.postgres or none) and not args.node
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, _raise_stop)
    started = []
    exports: list[str] = []
    try:
        if want_pg:
            from conveyor.testing.postgres import PostgresServer

            pg = PostgresServer(database=args.database).start()
            started.append(("postgres", pg))
            exports.append(f"export CONVEYOR_POSTGRES_URL={pg.url}")
            print(exports[-1], flush=True)
            print(f"postgres: {pg.url} (pid {pg.pid}, log {pg.log_path})", file=sys.stderr, flush=True)
        if want_kafka:
            from conveyor.testing.kafka import KafkaBroker

            kafka = KafkaBroker(heap=args.kafka_heap).start()
            started.append(("kafka", kafka))
            exports.append(f"export CONVEYOR_KAFKA_BOOTSTRAP={kafka.bootstrap_servers}")
            print(exports[-1], flush=True)
            print(f"kafka: {kafka.bootstrap_servers} (pid {kafka.pid}, log {kafka.log_path})",
                  file=sys.stderr, flush=True)
        if args.kube:
            from conveyor.testing.kube import KubeAPIServer

            kube = KubeAPIServer().start()
            started.append(("kubernetes", kube))
            exports.append(f"export CONVEYOR_KUBECONFIG={kube.admin_kubeconfig}")
            print(exports[-1], flush=True)
            print(f"kubernetes: {kube.server} (ready in {kube.ready_seconds:.1f}s, logs in {kube.workdir})",
                  file=sys.stderr, flush=True)
        if args.node:
            exports += _up_node(args, started)
        if args.env_file:
            _write_env_file(args.env_file, exports)
        print("running; stop with Ctrl-C or SIGTERM", file=sys.stderr, flush=True)
        while True:
            for name, component in started:
                if not component.is_running():
                    print(f"error: {name} exited unexpectedly; see its log above", file=sys.stderr, flush=True)
                    return 1
            time.sleep(1.0)
    except _Stop as s:
        print(f"received {s}, stopping", file=sys.stderr, flush=True)
        return 0
    except ComponentUnavailable as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1
    finally:
        # a second signal while stopping must not abandon the children
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for name, component in reversed(started):
            component.stop()
            print(f"{name} stopped", file=sys.stderr, flush=True)
        if args.env_file and started:
            Path(args.env_file).unlink(missing_ok=True)


def _up_node(args: argparse.Namespace, started: list) -> list[str]:
    """The single-node Kubernetes where pods run, a Kafka broker and PostgreSQL on its IP (pods
    and this host reach them at one address), the Dockerfile's images built (cached) and
    imported, and the chart installed: what ``examples/kubernetes/quickstart.sh`` stands on.
    Appends each component to ``started``; returns the export lines (also printed)."""
    from concurrent.futures import ThreadPoolExecutor

    from conveyor.testing.chart import install_chart
    from conveyor.testing.images import build_images
    from conveyor.testing.kafka import KafkaBroker
    from conveyor.testing.node import KubeNode
    from conveyor.testing.postgres import PostgresServer

    def step(what: str, began: float) -> None:
        print(f"{what} in {time.monotonic() - began:.1f}s", file=sys.stderr, flush=True)

    exports = []
    with ThreadPoolExecutor(1, thread_name_prefix="images") as pool:
        began = time.monotonic()
        building = pool.submit(build_images)  # mostly downloads on a fresh machine: beside the node's start
        node = KubeNode().start()
        started.append(("kubernetes node", node))
        step(f"kubernetes node {node.node_name} ready at {node.node_ip}", began)
        exports += [f"export KUBECONFIG={node.admin_kubeconfig}",
                    f"export CONVEYOR_KUBECTL={node.binaries.kubectl}", f"export CONVEYOR_HELM={node.binaries.helm}"]
        began = time.monotonic()
        kafka = KafkaBroker(host=node.node_ip, sasl_plain=False, heap=args.kafka_heap).start()
        started.append(("kafka", kafka))
        exports.append(f"export CONVEYOR_KAFKA_BOOTSTRAP={kafka.bootstrap_servers}")
        pg = PostgresServer(host=node.node_ip, client_cidrs=[node.network.pod_cidr], database=args.database).start()
        started.append(("postgres", pg))
        exports.append(f"export CONVEYOR_POSTGRES_URL={pg.url}")
        step(f"kafka at {kafka.bootstrap_servers} and postgres at {pg.url} (the node's IP)", began)
        began = time.monotonic()
        images = building.result()
        step("images " + ", ".join(image.ref for image in images.values()), began)
    began = time.monotonic()
    for image in images.values():
        node.import_image(image.archive, image.ref)
    namespace = install_chart(node, images)
    step(f"images imported into the node, chart installed (operator Ready in namespace {namespace})", began)
    for line in exports:
        print(line, flush=True)
    return exports


def _write_env_file(path: str, exports: list[str]) -> None:
    """Write the export lines to ``path`` atomically (it appears only once everything is up)."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text("".join(line + "\n" for line in exports))
    tmp.replace(target)


def _resolve(args: argparse.Namespace) -> int:
    from conveyor.testing.kafka import kafka_libs

    try:
        print(kafka_libs(args.kafka_version))
        if args.connect:
            from conveyor.testing.connect import connect_libs

            print(connect_libs(args.kafka_version))
        if args.s3:
            from conveyor.testing.s3 import s3proxy_jar

            print(s3proxy_jar(args.s3proxy_version))
        if args.schema_registry:
            from conveyor.testing.schema_registry import registry_home

            print(registry_home(args.apicurio_version))
        if args.avro:
            from conveyor.testing.avro_java import avro_libs, avro_tools_jar

            print(avro_libs())
            print(avro_tools_jar())
    except ComponentUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def _images(args: argparse.Namespace) -> int:
    from conveyor.testing.images import build_images

    started = time.monotonic()
    try:
        built = build_images(tuple(args.target or ("runtime", "operator")))
    except ComponentUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for target, image in built.items():
        print(f"{image.ref} {image.archive} {image.size_bytes}", flush=True)
        print(f"{target}: {'built' if image.built else 'cached'}, {image.size_bytes / 1e6:.0f} MB",
              file=sys.stderr, flush=True)
    print(f"done in {time.monotonic() - started:.1f}s", file=sys.stderr, flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    from conveyor.testing.kafka import KAFKA_VERSION
    from conveyor.testing.s3 import S3PROXY_VERSION
    from conveyor.testing.schema_registry import APICURIO_VERSION

    parser = argparse.ArgumentParser(prog="python -m conveyor.testing", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="run Kafka, PostgreSQL and/or Kubernetes in the foreground and print their "
                                   "addresses")
    up.add_argument("--kafka", action="store_true", help="start a Kafka broker")
    up.add_argument("--postgres", action="store_true", help="start PostgreSQL")
    up.add_argument("--kube", action="store_true",
                    help="start a Kubernetes control plane (etcd + kube-apiserver; binaries from tools/kube/build.sh)")
    up.add_argument("--node", action="store_true",
                    help="start a single-node Kubernetes where pods run (as root), Kafka and PostgreSQL on its IP, "
                         "build and import the images and install the chart; prints KUBECONFIG, CONVEYOR_KUBECTL, "
                         "CONVEYOR_HELM, CONVEYOR_KAFKA_BOOTSTRAP and CONVEYOR_POSTGRES_URL")
    up.add_argument("--database", default="conveyor", help="database to create (default: conveyor)")
    up.add_argument("--kafka-heap", default="1g", help="broker JVM heap (default: 1g)")
    up.add_argument("--env-file", metavar="PATH",
                    help="also write the export lines to PATH once every component is up (removed on stop); "
                         "scripts can wait for it to appear and `source` it")
    up.set_defaults(func=_up)
    res = sub.add_parser("resolve", help="resolve the Apache Kafka jars (and with --connect / --s3 / "
                                         "--schema-registry / --avro more) into the cache and print where they are")
    res.add_argument("--kafka-version", default=KAFKA_VERSION)
    res.add_argument("--connect", action="store_true",
                     help="also resolve the Apache Kafka Connect worker's jars (same version)")
    res.add_argument("--s3", action="store_true",
                     help="also resolve S3Proxy's jar (the harness's S3 server) and print its path")
    res.add_argument("--s3proxy-version", default=S3PROXY_VERSION)
    res.add_argument("--schema-registry", action="store_true",
                     help="also resolve and unpack Apicurio Registry (the harness's Schema Registry) and print "
                          "its directory")
    res.add_argument("--apicurio-version", default=APICURIO_VERSION)
    res.add_argument("--avro", action="store_true",
                     help="also resolve Apache Avro's Java library (the archive sink's Avro files read by Avro "
                          "itself) and print its directory")
    res.set_defaults(func=_resolve)
    img = sub.add_parser("images", help="build the Dockerfile's images with buildah (cached) and print "
                                        "<ref> <archive> <bytes> per image")
    img.add_argument("--target", action="append", choices=("runtime", "operator"),
                     help="a Dockerfile target (repeatable; default: both)")
    img.set_defaults(func=_images)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
