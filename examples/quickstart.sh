#!/usr/bin/env bash
# Quickstart: install what is missing, start a local Kafka broker and PostgreSQL, produce sample
# orders and run examples/orders-to-postgres.yaml with `conveyor run`, then show what arrived.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=../scripts/install-deps.sh
CONVEYOR_DEPS=quickstart source scripts/install-deps.sh
section "quickstart"
exec python examples/quickstart.py "$@"
