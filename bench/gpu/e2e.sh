#!/bin/bash
# End to end on a GPU host: vramlabd on every GPU, the real worker, the CLI, and a real Prometheus
# scraping the daemon every second. Submits every experiment of experiments/seed/ at once (with two
# GPUs two run side by side), waits for all, then saves the CLI's views and Prometheus's answers.
#   [SEEDS="NAME ..."] bench/gpu/e2e.sh OUTDIR [BIN_DIR] [PROMETHEUS_BINARY]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:?usage: e2e.sh OUTDIR [BIN_DIR] [PROMETHEUS_BINARY]}
bin=${2:-$root/build-gpu/bin}
prometheus=${3:-prometheus}
mkdir -p "$out"
work=$(mktemp -d)
export VRAMLAB_ADDR=127.0.0.1:7433
cli="$bin/vramlab"

"$bin/vramlabd" --listen "$VRAMLAB_ADDR" --data-dir "$work/data" --metrics-listen 127.0.0.1:9464 \
  --device cuda > "$out/daemon.log" 2>&1 &
daemon=$!
cat > "$work/prometheus.yml" <<YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: vramlab
    static_configs: [{targets: ['127.0.0.1:9464']}]
YAML
"$prometheus" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address=127.0.0.1:9090 > "$work/prometheus.log" 2>&1 &
prom=$!
for _ in $(seq 50); do "$cli" server > /dev/null 2>&1 && break; sleep 0.2; done
"$cli" server | tee "$out/server.txt"

ids=()
submit() {  # name spec-file [flags...]
  local name=$1 file=$2; shift 2
  ids+=("$("$cli" submit --spec "$root/experiments/seed/$file" --name "$name" "$@")")
}
# SEEDS="03-seq-torture-eager 17-switch-expandable-segments" runs only those files.
seeds=(${SEEDS:-})
[ ${#seeds[@]} -gt 0 ] || for file in "$root"/experiments/seed/*.json; do seeds+=("$(basename "$file" .json)"); done
for base in "${seeds[@]}"; do submit "${base#*-}" "$base.json"; done
"$cli" ls | tee "$out/ls-queued.txt"
for id in "${ids[@]}"; do "$cli" watch "$id" > "$out/watch-$id.txt" 2>&1; echo "$id exit $?"; done
"$cli" ls | tee "$out/ls-done.txt"
"$cli" ls --json > "$out/ls.json"
if [ -z "${SEEDS:-}" ]; then  # the full set, in file order
  "$cli" compare "${ids[0]}" "${ids[@]:7}" | tee "$out/compare-switches.txt"
  "$cli" compare "${ids[0]}" "${ids[1]}" | tee "$out/compare-basic.txt"
  "$cli" report "${ids[3]}" --format html -o "$out/report-torture-sdpa.html"
elif [ ${#ids[@]} -ge 2 ]; then
  "$cli" compare "${ids[@]}" | tee "$out/compare.txt"
fi
sleep 3  # two scrape intervals, so Prometheus has seen the last experiment end
query() {
  python3 -c 'import sys, urllib.parse, urllib.request
url = "http://127.0.0.1:9090/api/v1/query?" + urllib.parse.urlencode({"query": sys.argv[1]})
print(sys.argv[1], urllib.request.urlopen(url).read().decode())' "$1"
}
{
  query 'max_over_time(vramlab_gpu_allocated_bytes[30m])'
  query 'max_over_time(vramlab_gpu_reserved_bytes[30m])'
  query 'vramlab_experiments_total'
  query 'count_over_time(vramlab_experiment_running_info[30m])'
  query 'vramlab_experiment_running_info'
} | tee "$out/prometheus.txt"
kill "$daemon" "$prom"; wait
