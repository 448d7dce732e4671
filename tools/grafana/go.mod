// Build-only module for dashboard-check (see main.go and tests/unit/test_grafana_dashboard.py).
module conveyor.local/tools/grafana

go 1.21

require github.com/grafana/grafana-foundation-sdk/go v0.0.22
