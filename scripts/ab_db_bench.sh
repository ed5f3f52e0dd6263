#!/bin/bash
# A/B of two db_bench binaries: rounds interleaved (base, new, base, ...),
# a fresh database each run, medians of ops/sec per benchmark.
# Usage: scripts/ab_db_bench.sh BASE_BIN NEW_BIN ROUNDS db_bench-flags...
set -euo pipefail
BASE=$1; NEW=$2; ROUNDS=${3:-3}; shift 3
out=$(mktemp -d)
for r in $(seq 1 $ROUNDS); do
  for v in base new; do
    bin=$BASE; [ $v = new ] && bin=$NEW
    d=/tmp/abdb-$v; rm -rf $d /tmp/.abdb-$v.db_bench_port*
    "$bin" --db=$d "$@" 2>/dev/null | grep -E "^[a-z]+ +: .*ops/sec" | awk -v v=$v -v r=$r '{print v, $1, $5}' >> $out/res
    rm -rf $d /tmp/.abdb-$v.db_bench_port*
  done
done
python3 - $out/res <<'PY'
import sys,statistics,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    v,b,o=l.split(); d[(b,v)].append(float(o))
for b in sorted({k[0] for k in d}):
    base=statistics.median(d[(b,'base')]); new=statistics.median(d[(b,'new')])
    print(f"{b:14s} base {base:12,.0f}  new {new:12,.0f}  new/base {new/base:.3f}  (n={len(d[(b,'new')])})")
PY
