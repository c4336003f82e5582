#!/bin/sh
# `gpt export --from-hf BASE --adapter A --merge --hf merged`: the merged folder, loaded without the adapter,
# continues a prompt greedily with the ids that BASE with the adapter gives (BASE alone continues otherwise:
# the adapter is in the merged weights), and holds no adapter tensor.
#
#   export_merged.sh GPT BASE ADAPTER
set -eu
gpt=$1 base=$2 adapter=$3
"$gpt" export --from-hf "$base" --adapter "$adapter" --merge --hf merged
sample() { "$gpt" sample --hf "$@" --prompt "the" --max-new-tokens 12 --temperature 0 --print-ids --threads 2 | grep '^ids:'; }
adapted=$(sample "$base" --adapter "$adapter")
merged=$(sample merged)
base=$(sample "$base")
echo "adapted: $adapted"
echo "merged:  $merged"
[ "$adapted" = "$merged" ] || { echo "FAIL: the merged folder continues with other ids"; exit 1; }
[ "$base" != "$merged" ] || { echo "FAIL: the merged folder continues as the base alone does"; exit 1; }
if grep -q lora_A merged/model.safetensors; then echo "FAIL: adapter tensors in merged/model.safetensors"; exit 1; fi
test -f merged/tokenizer.json
echo "merged ok"
