#!/usr/bin/env bash
# How long a fresh Python takes to import the serving stack, by where it is read from and whether
# Python's bytecode is there: each of a Ray Serve LLM replica's processes begins with such an import
# (docs/PROVEN.md#serve-replica-start). Conditions, each timed REPEATS times, one pass of all of them
# before the next (so a run cut short still has every condition once):
#   disk  bytecode  warm   the site as unpacked, bytecode compiled, files in the page cache
#   disk  bytecode  cold   the same after dropping the page cache (root only; else "warm", said so)
#   tmpfs bytecode  memory a copy of the site (with its bytecode) in memory
#   disk  none      cold   no bytecode: an empty PYTHONPYCACHEPREFIX and PYTHONDONTWRITEBYTECODE, so every
#                          module is compiled from source and nothing is written (an image without .pyc)
# First, `compileall` of the whole site, timed: what precompiling costs where the image is prepared.
# Table: $OUT/import-times.tsv; raw `python -X importtime` output per import beside it. Needs the bundle
# unpacked as lab/gpu_run.sh does it (SITE). No import starts after DEADLINE_S seconds.
#   MODULES   the imports timed (default: the replica's, Ray Serve LLM's server, which imports vLLM)
#   TMPFS     where the in-memory copy goes (default /dev/shm/import-site; skipped if it does not fit)
set -uo pipefail
OUT=${OUT:-.lab/out}
SITE=${SITE:-/tmp/site}
REPEATS=${REPEATS:-2}
DEADLINE_S=${DEADLINE_S:-600}
MODULES=${MODULES:-ray.llm._internal.serve.core.server.llm_server}
TMPFS=${TMPFS:-/dev/shm/import-site}
mkdir -p "$OUT"
table="$OUT/import-times.tsv"
no_bytecode=$(mktemp -d)
began=$SECONDS

page_cache() {  # drop it when asked and allowed; say what the import then reads from
  if [ "$1" = cold ] && sync && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then echo cold; else echo warm; fi
}

time_import() {  # LOCATION SITE BYTECODE(bytecode|none) CACHE(warm|cold|memory) REPEAT
  local location=$1 site=$2 bytecode=$3 cache=$4 repeat=$5 module state started wall rc
  local -a env=(PYTHONPATH="$site:$PWD")
  [ "$bytecode" = none ] && env+=(PYTHONDONTWRITEBYTECODE=1 PYTHONPYCACHEPREFIX="$no_bytecode")
  for module in $MODULES; do
    [ $((SECONDS - began)) -lt "$DEADLINE_S" ] || return 0
    state=$cache; [ "$cache" = memory ] || state=$(page_cache "$cache")
    started=$(date +%s.%N)
    env "${env[@]}" python3 -X importtime -c "import $module" \
      2> "$OUT/importtime-$location-$bytecode-$state-$module-$repeat.txt"
    rc=$?
    wall=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$started" "$(date +%s.%N)")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$location" "$bytecode" "$state" "$module" "$repeat" "$wall" "$rc" | tee -a "$table"
  done
}

if [ "$DEADLINE_S" -lt 60 ]; then echo "import times skipped: DEADLINE_S=$DEADLINE_S leaves no time" | tee "$OUT/import-times-setup.txt"; exit 0; fi
printf 'location\tbytecode\tpage_cache\tmodule\trepeat\tseconds\texit\n' > "$table"
started=$(date +%s.%N)
python3 -m compileall -q -j0 "$SITE" > "$OUT/compileall.log" 2>&1
echo "compileall of $SITE (exit $?): $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$started" "$(date +%s.%N)") s, $(find "$SITE" -name '*.pyc' | wc -l) .pyc files, $(du -sh "$SITE" | cut -f1)" | tee "$OUT/import-times-setup.txt"
tmpfs_ok=0
need_kib=$(du -sk "$SITE" | cut -f1)
free_kib=$(df -k --output=avail "$(dirname "$TMPFS")" 2>/dev/null | tail -1)
if [ -n "$free_kib" ] && [ "$free_kib" -gt $((need_kib + 1048576)) ] && rm -rf "$TMPFS" && cp -a "$SITE" "$TMPFS"; then
  tmpfs_ok=1
  echo "tmpfs copy: $TMPFS ($(df -h --output=fstype,size "$(dirname "$TMPFS")" | tail -1))" | tee -a "$OUT/import-times-setup.txt"
else
  echo "tmpfs copy skipped: $(dirname "$TMPFS") has ${free_kib:-?} KiB free, the site needs $need_kib" | tee -a "$OUT/import-times-setup.txt"
fi
for repeat in $(seq "$REPEATS"); do
  time_import disk "$SITE" bytecode warm "$repeat"
  time_import disk "$SITE" bytecode cold "$repeat"
  [ "$tmpfs_ok" = 1 ] && time_import tmpfs "$TMPFS" bytecode memory "$repeat"
  time_import disk "$SITE" none cold "$repeat"
done
[ "$tmpfs_ok" = 1 ] && rm -rf "$TMPFS"
{ nproc | sed 's/^/cpus\t/'; python3 --version; df -h --output=source,fstype "$SITE" | tail -1 | sed 's/^/site on\t/'; } | tee -a "$OUT/import-times-setup.txt"
