#!/usr/bin/env bash
# A long fuzzing and crash campaign (the CI runs a few thousand cases and 100 kills):
#   bash scripts/fuzz-long.sh [CASES] [KILLS] [SEED]
# Release build; each property gets CASES cases, the crash loop KILLS kills from SEED.
set -euo pipefail
cd "$(dirname "$0")/.."
export PROPTEST_CASES="${1:-100000}"
export A2RAG_CRASH_ITERATIONS="${2:-2000}"
export A2RAG_CRASH_SEED="${3:-$RANDOM}"
echo "fuzz: $PROPTEST_CASES cases per property; crash loop: $A2RAG_CRASH_ITERATIONS kills, seed $A2RAG_CRASH_SEED" >&2
cargo test --release --test fuzz --test crash -- --nocapture
