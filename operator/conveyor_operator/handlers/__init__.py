"""kopf handlers: what the operator does for each Connector and its pods. Importing this package
registers them all (``kopf run -m conveyor_operator.handlers``; ``conveyor-operator`` does).

==========================  ==========================================================
event                       what happens
==========================  ==========================================================
create / update / resume    validate (images and ServiceAccounts against the
                            operator's allow-lists too); apply the namespace's Spark RBAC (once per
                            namespace), the ConfigMap, Service and Deployment
                            (server-side apply, owned by the Connector); push config
                            and state changes to a running driver (``PUT /config``,
                            ``POST /state``) or roll it (:mod:`.connector`)
Connector and pod events    the status poller (its own threads) reads the driver's ``GET /status``
                            into ``.status`` when due, at once after a pod event (:mod:`.status`)
(metrics)                   each create / update / resume is counted and timed
                            (:mod:`conveyor_operator.metrics`)
``conveyor.dev/restart``    restart the tasks; ``conveyor.dev/restart-task: "<id>"``
                            restarts one; the annotation is removed when done; Strimzi's
                            ``strimzi.io/restart`` and ``strimzi.io/restart-task`` the same
                            (:mod:`.connector`)
delete (finalizer)          ``POST /stop?connector_deleted=true`` to the driver, or a
                            one-shot cleanup Job when none runs; failures keep the
                            finalizer, back off, and show as ``CleanupFailed`` (:mod:`.deletion`)
pod DisruptionTarget or     ``POST /drain?pod=`` (closing-aware commits), an
deletionTimestamp           ``EvictionTranslated`` Event and a ``status.evictions`` entry
                            (:mod:`.eviction`)
offsets annotations         KIP-875's list, alter and reset through the Connector (:mod:`.offsets`)
==========================  ==========================================================

Handlers are thin: they validate (:mod:`conveyor_operator.validate`), reconcile
(:mod:`conveyor_operator.reconcile`) and observe (:mod:`conveyor_operator.observe`) through the
state they share (:mod:`conveyor_operator.context`). They are synchronous (kopf runs them in its
thread pool). kopf keeps a handler's progress under its function's name: renaming a handler
orphans the progress of Connectors in flight.
"""

from conveyor_operator.handlers import activities, connector, deletion, eviction, offsets, status  # noqa: F401
