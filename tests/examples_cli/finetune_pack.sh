#!/bin/sh
# `gpt finetune --pack` and `--checkpoint-activations`: the same steps with each step's examples packed into
# rows of the context, and then with every block recomputed in the backward too, give the padded run's
# training and validation losses (log.csv, to 1e-4 nats: float32 sums in another order).
#
#   finetune_pack.sh GPT MODEL DATA
set -eu
gpt=$1 model=$2 data=$3
run() { "$gpt" finetune --hf "$model" --data "$data" --val "$data" --lora-r 4 --lora-alpha 8 --steps 3 --batch-size 4 --eval-every 3 --threads 2 "$@"; }
run --out padded > /dev/null
run --pack --out packed
run --pack --checkpoint-activations --out recomputed > /dev/null
for other in packed recomputed; do
  paste -d, padded/log.csv $other/log.csv | awk -F, -v run=$other '
    NR == 1 { next }
    { for (c = 2; c <= 3; ++c) { d = $c - $(c + 3); if (d < 0) d = -d; if (d > 1e-4) { print "FAIL: step " $1 ": " $c " padded, " $(c + 3) " " run; bad = 1 } } }
    END { exit bad }'
done
echo "packed ok"
