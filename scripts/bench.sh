#!/usr/bin/env bash
# Sets up, builds, then runs the benchmark suite and the micro-benchmark examples.
#   bash scripts/bench.sh                 everything (the suite writes bench/results.json,
#                                         bench/details.json and the generated section of
#                                         docs/BENCHMARKS.md)
#   bash scripts/bench.sh suite [ARGS]    only the suite; ARGS go to tern-bench
#                                         (--quick, --only echo,frames,relay, --no-doc, ...)
#   bash scripts/bench.sh examples [NAME...]  only the examples (all, or the named ones)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ -d "$HOME/.cargo/bin" && ":$PATH:" != *":$HOME/.cargo/bin:"* ]]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
export RUST_BACKTRACE=0

# package:example, in run order. They print their own numbers (hand-written doc sections).
EXAMPLES=(
  tern-mosh:wire_throughput
  tern-bench:terminal_bench
  tern-bench:relay_latency
  tern-tests:linkemu_precision
)

run_suite() {
  printf '\n[bench] ===== suite (tern-bench) =====\n'
  cargo build --release -q -p tern-bench
  "${CARGO_TARGET_DIR:-target}/release/tern-bench" "$@"
}

run_examples() {
  local ran=()
  for b in "${EXAMPLES[@]}"; do
    local pkg=${b%%:*} ex=${b#*:}
    if (($#)) && [[ " $* " != *" $ex "* ]]; then continue; fi
    printf '\n[bench] ===== %s =====\n' "$b"
    cargo run --release -q -p "$pkg" --example "$ex"
    ran+=("$b")
  done
  printf '\n[bench] examples ran: %s\n' "${ran[*]:-none}"
}

bash scripts/setup.sh test
start=$SECONDS
case ${1:-all} in
  suite) shift; run_suite "$@" ;;
  examples) shift; run_examples "$@" ;;
  all) run_suite && run_examples ;;
  *) echo "usage: bench.sh [suite [ARGS] | examples [NAME...]]" >&2; exit 2 ;;
esac
printf '\n[bench] done in %ds\n' "$((SECONDS - start))"
