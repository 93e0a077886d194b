#!/usr/bin/env bash
# Sets up, then runs the benchmark examples, each printing its own numbers.
#   bash scripts/bench.sh                  all benchmarks
#   bash scripts/bench.sh wire_throughput  only these
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export RUST_BACKTRACE=0

# package:example, in run order.
BENCHES=(
  tern:wire_throughput
  tern:terminal_bench
  tern-relay:relay_latency
  tern-tests:linkemu_precision
)

bash scripts/setup.sh

example_exists() { # package example
  local dir
  case $1 in
    tern) dir=crate ;;
    tern-tests) dir=tests ;;
    tern-relay) dir=relay ;;
    *) return 1 ;;
  esac
  [[ -f $dir/examples/$2.rs || -f $dir/examples/$2/main.rs ]]
}

ran=() absent=()
for b in "${BENCHES[@]}"; do
  pkg=${b%%:*} ex=${b#*:}
  if (($#)) && [[ " $* " != *" $ex "* ]]; then continue; fi
  # Bootstrap phase: benchmarks land one by one, so an absent one is reported, not an error.
  if ! example_exists "$pkg" "$ex"; then
    absent+=("$b")
    continue
  fi
  printf '\n[bench] ===== %s =====\n' "$b"
  cargo run --release -q -p "$pkg" --example "$ex"
  ran+=("$b")
done
printf '\n[bench] ran: %s\n' "${ran[*]:-none}"
((${#absent[@]} == 0)) || printf '[bench] not present yet: %s\n' "${absent[*]}"
