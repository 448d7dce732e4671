"""Conveyor's runtime (private), in rooms by the process each part runs in, as Kafka Connect
splits its own: :mod:`.driver` (the driver: a connector's herder, a PySpark application),
:mod:`.rest` (its control port), :mod:`.herder` (the face and state of a driver the REST room
sees), :mod:`.task` (what runs in a Spark executor's Python worker), :mod:`.deletion`,
:mod:`.errors`, :mod:`.kafka` and :mod:`.config`. Each room imports only the rooms after it in
that list (``pyproject.toml``'s import contracts; ``task`` and ``deletion`` not each other)."""
