"""Run as a script by tests/integration/test_spark_rpc_security.py, in two processes.

``driver``: a connector driver's SparkSession (``spark_properties`` + ``start_spark_session``,
local master), one small job, then one JSON line: the enforced properties as the driver's
SparkConf holds them, its RPC address and the secret Spark generated; then it waits until
stdin closes.

``client HOST PORT SECRET``: a second JVM with its own Spark RpcEnv (client mode, as an
executor's) asks the driver for its ``HeartbeatReceiver`` endpoint once per way of
connecting, and prints one JSON line ``{attempt: "connected" | "refused: <causes>"}``.
"""

from __future__ import annotations

import json
import sys

_AES = {"spark.network.crypto.enabled": "true", "spark.network.crypto.authEngineVersion": "2",
        "spark.network.crypto.cipher": "AES/GCM/NoPadding", "spark.network.crypto.saslFallback": "false"}


def driver() -> None:
    from conveyor.runtime.driver.spark_session import spark_properties, start_spark_session
    from conveyor.spark_security import ENFORCED

    spark = start_spark_session(spark_properties("rpc-probe", 1))
    sc = spark.sparkContext
    conf = dict(sc.getConf().getAll())
    jvm = sc._jvm
    # On a local master Spark keeps its generated secret in the UGI credentials ("sparkCookie",
    # SecurityManager.initializeAuth); py4j cannot reflect SparkEnv here (protobuf is not on
    # pyspark's class path).
    secret = jvm.org.apache.hadoop.security.UserGroupInformation.getCurrentUser().getCredentials() \
        .getSecretKey(jvm.org.apache.hadoop.io.Text("sparkCookie"))
    total = sc.parallelize(range(10), 2).map(lambda x: x * 2).sum()
    print(json.dumps({"conf": {k: conf.get(k) for k in ENFORCED}, "host": conf["spark.driver.host"],
                      "port": int(conf["spark.driver.port"]), "secret": bytes(secret).decode(), "sum": total}),
          flush=True)
    sys.stdin.read()
    spark.stop()


def client(host: str, port: int, secret: str) -> None:
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway

    jvm = launch_gateway(SparkConf()).jvm
    config = jvm.java.lang.Class.forName("org.apache.spark.internal.config.package$").getField("MODULE$").get(None)

    def attempt(props: dict[str, str]) -> str:
        conf = jvm.org.apache.spark.SparkConf(False)
        for key, value in {"spark.rpc.askTimeout": "10s", "spark.rpc.lookupTimeout": "10s",
                           "spark.network.timeout": "10s", **props}.items():
            conf.set(key, value)
        security = jvm.org.apache.spark.SecurityManager(conf, jvm.scala.Option.apply(None),
                                                        config.AUTH_SECRET_FILE_DRIVER())
        env = jvm.org.apache.spark.rpc.RpcEnv.create("probe", "127.0.0.1", "127.0.0.1", 0, conf, security, 0, True)
        try:
            env.setupEndpointRef(jvm.org.apache.spark.rpc.RpcAddress(host, port), "HeartbeatReceiver")
            return "connected"
        except Exception as exc:  # noqa: BLE001 - the refusal is the result
            causes, cause = [], getattr(exc, "java_exception", None)
            while cause is not None and len(causes) < 4:
                causes.append(cause.toString().splitlines()[0][:200])
                cause = cause.getCause()
            return "refused: " + " <- ".join(causes or [str(exc)[:200]])
        finally:
            env.shutdown()

    print(json.dumps({
        "no secret": attempt({}),
        "wrong secret": attempt({"spark.authenticate": "true", "spark.authenticate.secret": "not-the-secret", **_AES}),
        "right secret, SASL instead of AES": attempt({"spark.authenticate": "true", "spark.authenticate.secret": secret}),
        "right secret": attempt({"spark.authenticate": "true", "spark.authenticate.secret": secret, **_AES}),
    }), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "driver":
        driver()
    else:
        client(sys.argv[2], int(sys.argv[3]), sys.argv[4])
