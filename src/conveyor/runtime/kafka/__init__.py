"""The runtime's Kafka: base client properties (:mod:`.clients`), the topics it creates for
itself and for source connectors (:mod:`.topics`, :mod:`.topic_creation`), source offsets in
Kafka Connect's offsets topic (:mod:`.offsets_topic`), zombie fencing of exactly-once sources
(:mod:`.fencing`), a sink group's lag (:mod:`.group_lag`), the checks the driver makes of the
cluster before it starts (:mod:`.preflight`), and librdkafka's repeated log lines
(:mod:`.log_repeats`), as Kafka Connect's ``storage/`` and ``util/`` keep them.
"""
