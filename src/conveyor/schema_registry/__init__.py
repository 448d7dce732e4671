"""Converters that talk to a Confluent Schema Registry (through ``confluent_kafka.schema_registry``).

Kept out of :mod:`conveyor.converters`, which stays free of Kafka clients; the converter
registry there loads these by name when a configuration asks for them.
"""
