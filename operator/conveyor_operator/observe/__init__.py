"""What the operator reads back of a running connector for its ``.status``: conditions
(:mod:`.conditions`), why its pods do not run (:mod:`.pod_health`), a driver's status document
in the CRD's words (:mod:`.driver_status`), automatic restarts (:mod:`.auto_restart`) and which
driver pods it may call directly (:mod:`.driver_pods`)."""
