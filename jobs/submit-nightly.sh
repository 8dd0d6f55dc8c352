#!/usr/bin/env bash
# Submit the nightly run to a running Ray cluster as a Ray job with a dated submission id
# (sweeper-nightly-20261122T020000Z), wait for it, and exit as it did (ray job submit exits
# 1 when the job fails: a regression, or any other non-zero exit of sweeper nightly).
#
#   RAY_ADDRESS=http://head:8265 jobs/submit-nightly.sh [PROFILE]
#
# PROFILE (default jobs/nightly.yaml) is uploaded with the job. Results and reports stay on
# the head node, under $SWEEPER_DATA (default /var/lib/sweeper), night after night.
# Run it from cron or a systemd timer; `flock` keeps two submissions from this host apart.
set -euo pipefail

profile=${1:-jobs/nightly.yaml}
data=${SWEEPER_DATA:-/var/lib/sweeper}
submission_id="sweeper-nightly-$(date -u +%Y%m%dT%H%M%SZ)"

exec flock --nonblock --conflict-exit-code 75 "${TMPDIR:-/tmp}/sweeper-nightly.lock" \
  ray job submit \
  --submission-id "$submission_id" \
  --working-dir "$(dirname "$profile")" \
  -- sweeper nightly --profile "$(basename "$profile")" \
  --output "$data/results" --reports-dir "$data/reports"
