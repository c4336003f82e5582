#!/bin/sh
# `gpt finetune --dtype bf16`: the frozen base held in bfloat16 with float32 adapters trains as the float32
# run does (each step's loss and the validation loss within 2 % of it: bfloat16 rounding), and its adapter
# samples with the float32 base.
#
#   finetune_bf16.sh GPT MODEL DATA
set -eu
gpt=$1 model=$2 data=$3
run() { "$gpt" finetune --hf "$model" --data "$data" --val "$data" --lora-r 4 --lora-alpha 8 --steps 4 --batch-size 4 --eval-every 4 --lr 1e-2 --threads 2 "$@"; }
run --out f32 > /dev/null
run --dtype bf16 --out bf16
paste -d, f32/log.csv bf16/log.csv | awk -F, '
  NR == 1 { next }
  { for (c = 2; c <= 3; ++c) { if ($c == "") continue; d = ($c - $(c + 3)) / $c; if (d < 0) d = -d; if (d > 0.02) { print "FAIL: step " $1 ": " $c " f32, " $(c + 3) " bf16"; bad = 1 } } }
  END { exit bad }'
"$gpt" sample --hf "$model" --adapter bf16/adapter --prompt x --max-new-tokens 2 --threads 2 > /dev/null
echo "bf16 ok"
