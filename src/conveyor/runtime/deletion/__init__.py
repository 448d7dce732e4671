"""What goes when a connector is deleted: the connector-deleted stop path of a connector that
is not running (:mod:`.cleanup`), its offsets when ``spec.deletionPolicy.offsets`` says so
(:mod:`.offsets`), and telling a namespace's deletion from a plain stop (:mod:`.namespace`)."""
