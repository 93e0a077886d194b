#!/usr/bin/env bash
# Captures every workload with the stock mosh-client: run-all.sh OUTDIR [COLS ROWS]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=workloads.sh
source "$here/workloads.sh"
outdir="${1:?usage: run-all.sh OUTDIR [COLS ROWS]}"
for w in $all_workloads; do
    "$here/capture.sh" "$w" "$outdir" "${2:-80}" "${3:-24}"
done
