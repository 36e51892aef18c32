#!/bin/bash
# Measures one `xdsd apply` of a large file into a fresh `xdsd serve` with a
# bolt store (BENCHMARKS.md, "Large batches"): the time, the peak RSS of both
# processes, and what the server held before and after.
#
#   go build -o /tmp/xdsd ./cmd/xdsd
#   go run ./internal/testutil/meshgen/gen -n 100000 -o /tmp/clusters.json
#   XDSD=/tmp/xdsd bench/scripts/large-apply.sh /tmp/clusters.json none
#
# usage: large-apply.sh FILE CLIENT [serve flags...]   (CLIENT: none, envoy, grpc)
#
# With HEAP=FILE, the largest heap profile of the server taken during the
# apply (every HEAP_EVERY seconds, default 1) is written to FILE.
#
# With BEFORE=FILE2, FILE2 is applied first and not measured: FILE then
# changes what is stored (each changed resource gets a history record).
set -u
f=$1 client=$2
shift 2
xdsd=${XDSD:-xdsd}
dir=$(mktemp -d)
trap 'kill $spid $mpid ${hpid:-} 2>/dev/null; rm -rf "$dir"' EXIT

# Any free port: the admin address is read from the server's log.
"$xdsd" serve --store "bolt:$dir/xdsd.db" --xds-addr 127.0.0.1:0 --admin-addr 127.0.0.1:0 "$@" >"$dir/serve.log" 2>&1 &
spid=$!
admin=
for _ in $(seq 100); do
	admin=$(sed -n 's/.*msg="xdsd serving".* admin=\([^ ]*\).*/\1/p' "$dir/serve.log")
	[ -n "$admin" ] && curl -sf "$admin/readyz" >/dev/null && break
	sleep 0.1
done
[ -n "$admin" ] || { echo "xdsd serve did not start:"; cat "$dir/serve.log"; exit 1; }
if [ -n "${HEAP:-}" ]; then
	# A heap profile of the server at the peak of the apply (HEAP=FILE):
	# taken every HEAP_EVERY seconds (default 1), the largest kept.
	(
		best=0
		while kill -0 $spid 2>/dev/null; do
			sleep "${HEAP_EVERY:-1}"
			size=$(curl -sf "$admin/debug/pprof/heap?debug=1" | sed -n 's/^# HeapAlloc = //p')
			[ -n "$size" ] && [ "$size" -gt "$best" ] && best=$size && curl -sf "$admin/debug/pprof/heap" -o "$HEAP"
		done
	) &
	hpid=$!
fi
kib() { awk -v k="$1:" '$1 == k {print $2}' /proc/$spid/status; }
if [ -n "${BEFORE:-}" ]; then
	"$xdsd" apply --admin "$admin" --client none -f "$BEFORE" >/dev/null || exit 1
	sleep 3 # until the memory the first apply freed is returned (in the background)
fi
before=$(kib VmRSS) anonbefore=$(kib RssAnon)

# Anonymous memory sampled every 50 ms (VmHWM also counts the binary's
# pages), with shell builtins only, from /proc/PID/statm (one line:
# resident less shared is the anonymous part): an awk and a sleep started
# 20 times a second took a tenth of this machine's 2 cores from the
# processes measured, and a loop over /proc/PID/status lines a twentieth.
page=$(( $(getconf PAGESIZE) / 1024 ))
mkfifo "$dir/tick"
(
	exec 9<>"$dir/tick"
	peak=0
	while read -r _ res shared _ </proc/$spid/statm 2>/dev/null; do
		a=$(( (res - shared) * page ))
		[ "$a" -gt "$peak" ] && peak=$a && echo "$peak" >"$dir/anon"
		read -r -t 0.05 -u 9 _ # a pause: nothing is written to the fifo
	done
) &
mpid=$!

cpu() { awk '{print $14 + $15}' /proc/$spid/stat; } # user + system, in ticks
cpu0=$(cpu)
start=$(date +%s.%N)
/usr/bin/time -f %M -o "$dir/apply.rss" "$xdsd" apply --admin "$admin" --client "$client" -f "$f" >"$dir/apply.out" 2>&1
rc=$?
end=$(date +%s.%N)
cpu1=$(cpu)
sleep 0.3
hwm=$(kib VmHWM)
sleep 3
after=$(kib VmRSS)
size=$(stat -c %s "$f")
n=$(head -1 "$dir/apply.out" | awk '{print $3}')

echo "exit $rc: $(head -1 "$dir/apply.out")"
awk -v s="$start" -v e="$end" -v n="$n" -v size="$size" -v arss="$(cat "$dir/apply.rss")" -v cpu=$(( cpu1 - cpu0 )) -v hz="$(getconf CLK_TCK)" \
	-v before="$before" -v anonbefore="$anonbefore" -v hwm="$hwm" -v anon="$(cat "$dir/anon")" -v after="$after" -v db="$(stat -c %s "$dir/xdsd.db")" 'BEGIN {
	t = e - s
	printf "input %.0f MB, %.1f s, %.0f resources/s\n", size/1e6, t, n/t
	printf "server CPU %.1f s: %.0f resources per CPU second\n", cpu/hz, n/(cpu/hz)
	printf "xdsd apply peak RSS %.0f MiB\n", arss/1024
	printf "server RSS before %.0f MiB, peak %.0f MiB (anonymous %.0f MiB), growth %.0f MiB = %.2fx the input, 3 s after %.0f MiB\n",
		before/1024, hwm/1024, anon/1024, (hwm-before)/1024, (hwm-before)*1024/size, after/1024
	printf "server anonymous memory before %.0f MiB, peak %.0f MiB: growth %.2fx the input\n", anonbefore/1024, anon/1024, (anon-anonbefore)*1024/size
	printf "store file %.0f MB\n", db/1e6
}'
