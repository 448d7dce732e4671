"""Checks of a Connector before anything is applied, beyond what the CRD's schema and admission
policy refuse: the images and ServiceAccounts the operator's settings allow, the references it
names, and the connector's own configuration (:mod:`.checks`), with the connector classes the
operator may import for that (:mod:`.connector_classes`). A new check of a spec goes here."""
