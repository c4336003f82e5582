#!/bin/sh
# `gpt train --arch ROW --checkpoint-activations`: the same run with every Llama-style block recomputed in the
# backward writes the same log.csv (training losses and validation to 1e-5).
#
#   train_checkpointing.sh GPT ROW
set -eu
gpt=$1 row=$2
run() { "$gpt" train --arch "$row" --n-kv-head 2 --steps 3 --batch-size 2 --context 16 --n-layer 2 --n-head 4 --d-model 16 --eval-every 0 --eval-tokens 64 --sample-tokens 0 --threads 2 "$@"; }
run --out plain > /dev/null
run --checkpoint-activations --out recomputed > /dev/null
paste -d, plain/log.csv recomputed/log.csv | awk -F, '
  NR == 1 { next }
  { for (c = 4; c <= 5; ++c) { if ($c == "" && $(c + 5) == "") continue; d = $c - $(c + 5); if (d < 0) d = -d; if (d > 1e-5) { print "FAIL: step " $1 ": " $c " plain, " $(c + 5) " recomputed"; bad = 1 } } }
  END { exit bad }'
[ "$(wc -l < plain/log.csv)" -eq 4 ]
echo "$row recomputed ok"
