"""The driver's control port: the control API's server (:mod:`.server`), Kafka Connect's REST
API (:mod:`.connect_rest`, its documents in :mod:`.connect_documents`, KIP-875 offsets in
:mod:`.connect_offsets`), what ``PUT /config`` may change (:mod:`.live_config`), the metrics it
serves (:mod:`.metrics`, :mod:`.connect_metrics`) and its read deadlines.

Everything here knows the driver only as a :class:`~conveyor.runtime.herder.protocol.Herder`.
A new control API path goes in :mod:`.server`'s ``ENDPOINTS``; a new Kafka Connect path in
:mod:`.connect_rest`'s ``CONNECT_ENDPOINTS``.
"""
