#!/bin/bash
# A/B of two db_bench binaries: rounds interleaved (base, new, base, ...),
# a fresh database each run, medians of ops/sec per benchmark.
# Usage: scripts/ab_db_bench.sh BASE_BIN NEW_BIN ROUNDS db_bench-flags...
# LOAD="db_bench-flags" instead loads one database per binary first
# (fillseq with those flags) and runs every round on it reopened
# (--use_existing_db=1): read benchmarks on the state a load leaves, with no
# merge of the load still running in the measured window. Each binary loads
# its own, since a database one writes the other may refuse.
set -euo pipefail
BASE=$1; NEW=$2; ROUNDS=${3:-3}; shift 3
out=$(mktemp -d)
clean() { rm -rf "$1" "/tmp/.$(basename "$1").db_bench_port"*; }
if [[ -n ${LOAD:-} ]]; then
  for v in base new; do
    bin=$BASE; [ $v = new ] && bin=$NEW
    clean /tmp/abdb-loaded-$v
    "$bin" --db=/tmp/abdb-loaded-$v --benchmarks=fillseq $LOAD >/dev/null 2>&1
  done
fi
for r in $(seq 1 $ROUNDS); do
  for v in base new; do
    bin=$BASE; [ $v = new ] && bin=$NEW
    if [[ -n ${LOAD:-} ]]; then
      d=/tmp/abdb-loaded-$v; reuse=--use_existing_db=1
    else
      d=/tmp/abdb-$v; reuse=; clean $d
    fi
    "$bin" --db=$d $reuse "$@" 2>/dev/null | grep -E "^[a-z_0-9]+ +: .*ops/sec" | awk -v v=$v -v r=$r '{print v, $1, $5}' >> $out/res
    [[ -n $reuse ]] || clean $d
  done
done
[[ -z ${LOAD:-} ]] || for v in base new; do clean /tmp/abdb-loaded-$v; done
python3 - $out/res <<'PY'
import sys,statistics,collections
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    v,b,o=l.split(); d[(b,v)].append(float(o))
for b in sorted({k[0] for k in d}):
    base=statistics.median(d[(b,'base')]); new=statistics.median(d[(b,'new')])
    sp=lambda v: max(d[(b,v)])/min(d[(b,v)])-1
    print(f"{b:14s} base {base:12,.0f}  new {new:12,.0f}  new/base {new/base:.3f}  (n={len(d[(b,'new')])}, spread base {sp('base'):.0%} new {sp('new'):.0%})")
PY
