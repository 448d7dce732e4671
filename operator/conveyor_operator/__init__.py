"""Conveyor's Kubernetes operator (kopf): reconciles ``Connector`` resources
(``connectors.conveyor.dev``) into a Spark driver Deployment and its objects, keeps
``.status`` true from the driver's control API, drives deletion through a finalizer and
translates pod evictions into closing-aware commits.

Run it with ``conveyor-operator`` (or ``kopf run -m conveyor_operator.handlers``).
"""

GROUP = "conveyor.dev"
VERSION = "v1alpha1"
PLURAL = "connectors"
KIND = "Connector"
