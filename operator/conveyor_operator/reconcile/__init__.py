"""What the operator makes of a Connector: the Kubernetes objects that run it
(:mod:`.render`, :mod:`.spark_pods`, :mod:`.network_policy`), the per-connector control Secret
and the key it derives from (:mod:`.control_secret`, :mod:`.control_key`), the namespace's
shared objects (:mod:`.shared_objects`), a Connector that follows another of the same name
(:mod:`.succession`) and live changes pushed to a running driver (:mod:`.push`).

A new Kubernetes object for each connector goes in :mod:`.render` (``objects``); a new Spark
property of its pods in :mod:`.spark_pods`.
"""
