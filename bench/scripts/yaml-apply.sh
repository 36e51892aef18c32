#!/bin/bash
# Applies the same Istio-like clusters as JSON, as flow-style YAML
# documents (each cluster's line of JSON between "---" markers) and as
# block-style YAML documents, by turns, each into a fresh `xdsd serve`
# (bolt) with `xdsd apply --client none` (large-apply.sh), and prints each
# run and the median, min and max of each form (BENCHMARKS.md, "YAML at
# JSON speed"): resources/s, the server's growth and its CPU per resource
# (which a loaded machine changes less than the wall time).
#
#   go build -o /tmp/xdsd ./cmd/xdsd
#   XDSD=/tmp/xdsd bench/scripts/yaml-apply.sh 100000 5
#
# usage: yaml-apply.sh [N [ROUNDS]]   (defaults: 100,000 clusters, 5 rounds)
set -u
n=${1:-100000} rounds=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${DIR:-/tmp/yaml-apply}
mkdir -p "$dir"
gen() { # FILE ARGS...: generated once
	[ -s "$1" ] || (cd "$root" && go run ./internal/testutil/meshgen/gen -n "$n" -o "$1" "${@:2}") || exit 1
}
gen "$dir/clusters-$n.json"
gen "$dir/flow-$n.yaml" -yaml flow
gen "$dir/block-$n.yaml" -yaml block
out=$dir/runs.txt
: >"$out"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
	for form in json flow block; do
		f=$dir/block-$n.yaml
		case $form in
		json) f=$dir/clusters-$n.json ;;
		flow) f=$dir/flow-$n.yaml ;;
		esac
		res=$("$here/large-apply.sh" "$f" none)
		rate=$(echo "$res" | sed -n 's/.* s, \([0-9]*\) resources\/s/\1/p')
		growth=$(echo "$res" | sed -n 's/.*growth [0-9]* MiB = \([0-9.]*\)x the input.*/\1/p')
		anon=$(echo "$res" | sed -n 's/^server anonymous memory.*growth \([0-9.]*\)x the input/\1/p')
		percpu=$(echo "$res" | sed -n 's/^server CPU .*: \([0-9]*\) resources per CPU second/\1/p')
		echo "round $r $form: $(echo "$res" | head -2 | tail -1); growth ${growth}x, anonymous ${anon}x; $(echo "$res" | grep '^server CPU')"
		echo "$form $rate $growth $anon $percpu" >>"$out"
	done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for form in json flow block; do
	for col in 2 3 4 5; do
		awk -v f=$form -v c=$col '$1 == f {print $c}' "$out" | sort -g | awk -v f=$form -v c=$col '
			{v[NR] = $1}
			END {
				name = (c == 2 ? "resources/s" : c == 3 ? "growth" : c == 4 ? "anonymous growth" : "resources per server CPU second")
				m = (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2)
				printf "%s %s: median %s (%s-%s, %d runs)\n", f, name, m, v[1], v[NR], NR
			}'
	done
done
