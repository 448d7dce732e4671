"""The connector's configuration as the runtime reads it: the runtime's own keys in
``spec.config`` (Kafka Connect's worker and connector keys, :mod:`.settings`), finding connector
classes (:mod:`.plugins`), validating a whole config before anything starts
(:mod:`.validation`) and keys nothing reads (:mod:`.keys`).

A new runtime key goes in :mod:`.settings`; a new check of a config in :mod:`.validation`.
Nothing here talks to Kafka, Spark or Kubernetes.
"""
