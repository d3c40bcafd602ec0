#!/usr/bin/env bash
# tools/bench_plot.sh - the charts of one `make bench` run, drawn with gnuplot (Debian
# package gnuplot-nox; deploy/local/deps.sh --bench installs it) from the run's raw reports:
#
#   ack-latency.svg   acknowledgement latency by percentile (p50, p99, p99.9, max) at 8, 64
#                     and 256 closed-loop clients and open loop at half of the maximum;
#   throughput.svg    acknowledgements/s against clients, beside the database's INSERT
#                     ceiling and the INSERT-then-publish ceiling at the same concurrency;
#   cpu.svg           CPU ms per payment by process in each measured phase (stacked).
#
# usage: tools/bench_plot.sh BENCH_DIR   (tools/bench.sh calls it with var/bench; the charts
# land in BENCH_DIR/charts). Exits 0 without drawing when gnuplot is absent.
set -euo pipefail
B=${1:?usage: tools/bench_plot.sh BENCH_DIR}
if ! command -v gnuplot >/dev/null 2>&1; then
	echo "bench_plot: gnuplot not installed (deploy/local/deps.sh --bench); no charts" >&2
	exit 0
fi
C=$B/charts
mkdir -p "$C"
kv() { sed -n "s/^$2=//p" "$1" | tail -n 1; }

# Latency: one row per percentile, one column per level, in ms.
{
	echo "# pct 8 64 256 half"
	for p in "50 ack_p50_us" "99 ack_p99_us" "99.9 ack_p999_us" "100 ack_max_us"; do
		set -- $p
		printf '%s' "$1"
		for f in ingest-8 ingest-64 ingest-256 ingest-half; do
			printf ' %s' "$(awk -v v="$(kv "$B/$f.kv" "$2")" 'BEGIN { printf "%.2f", v / 1000 }')"
		done
		echo
	done
} >"$C/latency.dat"
# Throughput: one row per client level.
{
	echo "# clients acked/s insert/s insert+publish/s"
	for c in 8 64 256; do
		echo "$c $(kv "$B/ingest-$c.kv" ack_rate) $(kv "$B/dbreserve-$c.kv" rate) $(kv "$B/publish-$c.kv" rate)"
	done
} >"$C/throughput.dat"

gnuplot <<GP
set terminal svg size 720,420 dynamic font "sans,11"
set output "$C/ack-latency.svg"
set title "Acknowledgement latency by percentile (ingest alone)"
set xlabel "percentile"
set ylabel "ms"
set logscale y
set key left top
set style data linespoints
set xtics ("p50" 0, "p99" 1, "p99.9" 2, "max" 3)
plot "$C/latency.dat" using 0:2 title "8 clients", "" using 0:3 title "64 clients", \
	"" using 0:4 title "256 clients", "" using 0:5 title "open loop, half of the maximum"

set output "$C/throughput.svg"
set title "Acknowledgements/s against clients, beside the ceilings of the same work"
unset logscale y
set logscale x 2
set xlabel "concurrent clients (connections)"
set ylabel "per second"
set xtics (8, 64, 256)
set yrange [0:*]
plot "$C/throughput.dat" using 1:2 title "ingest acknowledgements", \
	"" using 1:4 title "ceiling: INSERT then publish and wait", \
	"" using 1:3 title "ceiling: the INSERT alone"

set output "$C/cpu.svg"
set title "CPU ms per payment by process"
unset logscale x
set xlabel ""
set ylabel "CPU ms per payment"
set style data histograms
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.6
set key outside right
set xtics auto
plot "$B/cpu.dat" using 2:xtic(1) title "ingest", "" using 3 title "processors", \
	"" using 4 title "retrier", "" using 5 title "MariaDB", "" using 6 title "Kafka", \
	"" using 7 title "simulator"
GP
echo "bench_plot: charts in $C" >&2
