#!/usr/bin/env bash
# Submit the nightly run to a running Ray cluster as a Ray job with a dated submission id
# (sweeper-nightly-20261122T020000Z), wait for it, and exit as it did (ray job submit exits
# 1 when the job fails: a regression, a condemned node, GPU or link, or any other non-zero
# exit of sweeper nightly).
#
#   RAY_ADDRESS=http://head:8265 jobs/submit-nightly.sh [PROFILE]
#
# PROFILE (default jobs/nightly.yaml, the fleet's scan; jobs/weekly.yaml for the weekly
# sweep of every pair) is uploaded with the job. Results and reports stay on
# the head node, under $SWEEPER_DATA (default /var/lib/sweeper), night after night. After
# the run, failed or not, the job writes its figures for node_exporter's textfile collector
# on the head node: $SWEEPER_TEXTFILE_DIR/sweeper.prom (default Debian's
# /var/lib/prometheus/node-exporter; docs/MONITORING.md), and exits as the nightly did.
# Run it from cron or a systemd timer; `flock` keeps two submissions from this host apart.
set -euo pipefail

profile=${1:-jobs/nightly.yaml}
data=${SWEEPER_DATA:-/var/lib/sweeper}
textfile=${SWEEPER_TEXTFILE_DIR:-/var/lib/prometheus/node-exporter}/sweeper.prom
submission_id="sweeper-nightly-$(date -u +%Y%m%dT%H%M%SZ)"

exec flock --nonblock --conflict-exit-code 75 "${TMPDIR:-/tmp}/sweeper-nightly.lock" \
  ray job submit \
  --submission-id "$submission_id" \
  --working-dir "$(dirname "$profile")" \
  -- sh -c 'sweeper nightly --profile "$1" --results "$2/results" --reports-dir "$2/reports"
status=$?
sweeper export --results "$2/results" --prometheus "$3"
exit "$status"' nightly "$(basename "$profile")" "$data" "$textfile"
