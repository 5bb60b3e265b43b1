#!/usr/bin/env bash
# The main job end to end on the bundled corpus with the embedded defaults: no network,
# no API key. Builds, ingests examples/corpus into a fresh data dir, asks four questions (the last is out of scope).
set -euo pipefail
cd "$(dirname "$0")/.."
# The dev profile builds dependencies optimised (Cargo.toml) and shares the test build.
# The first build compiles a few hundred crates (minutes on a small machine): cargo's own
# progress shows it is working; later runs are instant.
echo "Building a2rag (the first build takes several minutes; cargo shows its progress)..." >&2
cargo build
bin() { cargo run --quiet -- "$@"; }
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
bin --data-dir "$data" ingest examples/corpus
bin --data-dir "$data" stats
for q in "Who founded the company that built the Aurora Observatory?" \
         "When was Ingrid Halden born?" \
         "Which astronomer, who directed the Northern Lights Array, discovered a comet with the Aurora Telescope?" \
         "What is the boiling point of liquid nitrogen?"; do
  echo; echo "=== $q"
  bin --data-dir "$data" ask "$q"
done
