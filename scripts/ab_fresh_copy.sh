#!/usr/bin/env bash
# A/B of two db_bench binaries on fresh copies of one loaded database, the
# shape of the write cells: 1M keys of 16 B loaded once with fillseq, then
# each run on its own copy (--use_existing_db=1), 4 threads, 3 s, rounds
# interleaved (base, new, base, ...), medians of ops/sec.
# Usage: scripts/ab_fresh_copy.sh BASE_BIN NEW_BIN ROUNDS BENCH VALUE_SIZE [DIR]
# AB_FLAGS adds db_bench flags to the measured runs (e.g. --seek_nexts=100).
set -euo pipefail
BASE=$1; NEW=$2; R=$3; B=$4; VS=$5; DIR=${6:-/tmp}
L=$DIR/ab-loaded-$VS
if [[ ! -d $L ]]; then
  "$BASE" --db="$L" --benchmarks=fillseq --num=1000000 --key_size=16 --value_size="$VS" >/dev/null
fi
for r in $(seq 1 "$R"); do
  for v in base new; do
    bin=$BASE; [[ $v == new ]] && bin=$NEW
    rm -rf "$DIR/ab-run"; cp -a "$L" "$DIR/ab-run"; sync
    "$bin" --db="$DIR/ab-run" --use_existing_db=1 --benchmarks="$B" --num=1000000 --key_size=16 \
      --value_size="$VS" --threads=4 --duration=3 ${AB_FLAGS:-} 2>/dev/null |
      grep -E "^$B +:" | awk -v v=$v '{print v, $5}'
  done
done | python3 -c "
import sys, statistics, collections
d = collections.defaultdict(list)
for l in sys.stdin:
    v, o = l.split(); d[v].append(float(o))
b, n = statistics.median(d['base']), statistics.median(d['new'])
print(f'$B value_size=$VS base {b:,.0f} new {n:,.0f} new/base {n/b:.3f} (base {sorted(d[\"base\"])}, new {sorted(d[\"new\"])})')
"
rm -rf "$DIR/ab-run"
