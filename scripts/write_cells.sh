#!/usr/bin/env bash
# The in-memory write cells side by side: an old and a new vmemkv db_bench
# binary and the rival engines (through NEW, which must be built with their
# features), interleaved round by round, each run on a fresh copy of its
# engine's own loaded database: 1M keys of 16 B loaded once per engine and
# value size with fillseq, then --use_existing_db=1, 4 threads, 3 s.
# Prints a markdown table of medians, each cell's spread, and new / fastest
# rival. The whole default table takes about 15 minutes on 2 cores.
#
# Usage: scripts/write_cells.sh BASE_BIN NEW_BIN [ROUNDS] [DIR]
# CELLS="insert:8 delete:8 ..." and RIVALS="lmdb rocksdb ..." override the
# defaults; RIVALS= (empty) compares the two binaries alone; THREADS=1 runs
# the cells at one thread (default 4).
set -euo pipefail
BASE=$1; NEW=$2; R=${3:-3}; DIR=${4:-/tmp/write-cells}
CELLS=${CELLS:-"insert:8 update_zipf:8 delete:8 insert:1024 update_zipf:1024"}
RIVALS=${RIVALS-"lmdb rocksdb blobdb fjall fjall-blob sparkey"}
THREADS=${THREADS:-4}
mkdir -p "$DIR"
OUT=$DIR/runs.txt; : >"$OUT"

# who: base | new | <rival engine>
bin_of() { [[ $1 == base ]] && echo "$BASE" || echo "$NEW"; }
engine_of() { [[ $1 == base || $1 == new ]] && echo vmemkv || echo "$1"; }

loaded() { # who value_size -> path of the loaded database (made on first use)
    local who=$1 vs=$2 e; e=$(engine_of "$who")
    local l=$DIR/loaded-$e-$vs
    [[ $who == base ]] && l=$DIR/loaded-vmemkv-base-$vs
    if [[ ! -d $l ]]; then
        "$(bin_of "$who")" --engine="$e" --db="$l" --benchmarks=fillseq --num=1000000 \
            --key_size=16 --value_size="$vs" >/dev/null 2>&1 || mkdir -p "$l.failed"
    fi
    echo "$l"
}

for r in $(seq 1 "$R"); do
    for cell in $CELLS; do
        b=${cell%%:*}; vs=${cell##*:}
        for who in base new $RIVALS; do
            l=$(loaded "$who" "$vs")
            [[ -d $l.failed ]] && continue
            rm -rf "$DIR/run"; cp -a "$l" "$DIR/run"; sync
            ops=$("$(bin_of "$who")" --engine="$(engine_of "$who")" --db="$DIR/run" \
                --use_existing_db=1 --benchmarks="$b" --num=1000000 --key_size=16 \
                --value_size="$vs" --threads="$THREADS" --duration=3 2>/dev/null |
                awk -v b="$b" '$1 == b && $2 == ":" {print $5}') || true
            [[ -n $ops ]] && echo "$cell $who $ops" >>"$OUT"
        done
    done
done
rm -rf "$DIR/run"

python3 - "$OUT" "$CELLS" "$RIVALS" <<'EOF'
import sys, statistics, collections
runs, cells, rivals = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
d = collections.defaultdict(list)
for line in open(runs):
    cell, who, ops = line.split()
    d[(cell, who)].append(float(ops))
def fmt(v): return f"{v/1e3:,.0f}k"
print("| cell | vmemkv base | vmemkv new | new / base | fastest rival | new / rival | spread of new |")
print("|---|---:|---:|---:|---|---:|---:|")
for cell in cells:
    b, n = d.get((cell, 'base')), d.get((cell, 'new'))
    if not b or not n:
        continue
    mb, mn = statistics.median(b), statistics.median(n)
    best = max(((statistics.median(d[(cell, r)]), r) for r in rivals if d.get((cell, r))),
               default=None)
    riv = f"{best[1]} {fmt(best[0])}" if best else "-"
    ratio = f"{mn/best[0]:.2f}x" if best else "-"
    spread = f"{min(n)/1e3:,.0f}-{max(n)/1e3:,.0f}k"
    name = cell.replace(':', ', ') + " B"
    print(f"| {name} | {fmt(mb)} | {fmt(mn)} | {mn/mb:.2f}x | {riv} | {ratio} | {spread} |")
EOF
