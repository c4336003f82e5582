#!/bin/sh
# `gpt finetune` on a GPT-2 folder: LoRA on c_attn (PEFT's default for GPT-2; held as W_q, W_k and W_v, one A
# among them) with the adapters' dropout on. The same run with every block recomputed in the backward
# (--checkpoint-activations: the dropout masks replayed) writes the same log.csv (to 1e-5 nats); the adapter
# is in PEFT's layout for GPT-2 (fan_in_fan_out true) and samples.
#
#   finetune_gpt2.sh GPT MODEL DATA
set -eu
gpt=$1 model=$2 data=$3
run() { "$gpt" finetune --hf "$model" --data "$data" --val "$data" --truncate right --lora-r 4 --lora-alpha 8 --lora-dropout 0.3 --lr 1e-2 --steps 4 --batch-size 4 --eval-every 2 --threads 2 "$@"; }
run --out plain
run --checkpoint-activations --out recomputed > /dev/null
paste -d, plain/log.csv recomputed/log.csv | awk -F, '
  NR == 1 { next }
  { for (c = 2; c <= 3; ++c) { d = $c - $(c + 3); if (d < 0) d = -d; if (d > 1e-5) { print "FAIL: step " $1 ": " $c " plain, " $(c + 3) " recomputed"; bad = 1 } } }
  END { exit bad }'
grep -q '"fan_in_fan_out": true' plain/adapter/adapter_config.json
grep -q '"c_attn"' plain/adapter/adapter_config.json
"$gpt" sample --hf "$model" --adapter plain/adapter --prompt x --max-new-tokens 2 --threads 2 > /dev/null
echo "gpt2 ok"
