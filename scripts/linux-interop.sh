#!/usr/bin/env bash
# Live interoperability suite against Linux Homa (HomaModule in a qemu guest,
# the kit in ../shared/linux-homa; docs/linux-interop.md). Each case boots the
# guest with the kit's run.sh and runs crates/homa/examples/interop.rs (raw
# IPv4, protocol 146) against it, in both directions; it then checks the
# outcome, Linux's own counters (/proc/net/homa_metrics) and ours.
#
#   scripts/linux-interop.sh [CASE...]      (default: every case)
#
# Exits 0 only if every case passed; prints a per-case table. Exits 0 with
# "SKIP: ..." when not root, without /dev/net/tun, or without the kit
# (LINUX_HOMA_KIT, default ../shared/linux-homa beside the repository).
# Installs qemu-system-x86 and nftables with apt-get when root and missing.
# Environment: LINUX_HOMA_KIT, CARGO_TARGET_DIR, LHP_INTEROP_OUT (keeps the
# logs there; default a temporary directory, removed unless a case failed),
# LHP_INTEROP_LOSS (loss percentage of the loss cases, default 5).
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KIT=${LINUX_HOMA_KIT:-$ROOT/../shared/linux-homa}
LOSS=${LHP_INTEROP_LOSS:-5}
T_START=$SECONDS

skip() {
	echo "SKIP: linux-interop: $*"
	exit 0
}
[ "$(id -u)" = 0 ] || skip "not root (the kit needs a network namespace and a tap device)"
[ -c /dev/net/tun ] || modprobe tun 2>/dev/null || true
[ -c /dev/net/tun ] || skip "no /dev/net/tun"
[ -x "$KIT/run.sh" ] && [ -r "$KIT/vmlinuz" ] || skip "no Linux Homa kit at $KIT (set LINUX_HOMA_KIT)"
[ "$(uname -m)" = x86_64 ] || skip "the kit needs an x86-64 host"

apt_install() { # COMMAND PACKAGE
	command -v "$1" >/dev/null && return 0
	command -v apt-get >/dev/null || return 1
	echo "linux-interop: installing $2"
	{ DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$2" ||
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$2"; }; } \
		>/dev/null 2>&1
	command -v "$1" >/dev/null
}
apt_install qemu-system-x86_64 qemu-system-x86 || { echo "linux-interop: FAIL: qemu-system-x86 is missing"; exit 1; }
apt_install nft nftables || { echo "linux-interop: FAIL: nftables (nft) is missing"; exit 1; }

# ---- the host side ----
cd "$ROOT"
if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then PATH="$HOME/.cargo/bin:$PATH"; fi
echo "linux-interop: building the host side (cargo build -p homa-rs --example interop)"
cargo build -q -p homa-rs --example interop || { echo "linux-interop: FAIL: build"; exit 1; }
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
case $TARGET in /*) ;; *) TARGET=$ROOT/$TARGET ;; esac
BIN=$TARGET/debug/examples/interop
[ -x "$BIN" ] || { echo "linux-interop: FAIL: $BIN not built"; exit 1; }

if [ -n "${LHP_INTEROP_OUT:-}" ]; then
	OUT=$LHP_INTEROP_OUT
	mkdir -p "$OUT"
	KEEP_OUT=1
else
	OUT=$(mktemp -d "${TMPDIR:-/tmp}/linux-interop.XXXXXX")
	KEEP_OUT=0
fi

# Timers for an emulated guest (a small RPC takes 0.3-30 ms under TCG, a
# 1 MB one 50-300 ms): first RESEND after 10 ms, a silent peer dead after
# about 1 s. One case runs the runtime's defaults (5 ms, about 105 ms).
LENIENT="--resend-ticks 10 --resend-interval 10 --timeout-resends 100"
SIZES=1,100,1424,1425,5000,40000,40001,60000,250000,1000000

# ---- helpers ----
# gmetric LOG NAME: a Linux metric summed over cores ("-" if absent).
gmetric() { awk -v n="$2" '{ sub(/\r$/, "") } $1 == "HOMA_METRIC" && $2 == n { s += $3; f = 1 } END { print f ? s : 0 }' "$1"; }
# hmetric LOG NAME: one of our metrics, as the interop example printed it.
hmetric() { awk -v n="$2" '$1 == "HOMARS" && $2 == "METRIC" && $3 == n { v = $4 } END { print v == "" ? "-" : v }' "$1"; }
# The kit's run.sh result: 0 pass; 1 fail. A failure whose only reason is
# the guest's "MP-BIOS bug: 8254 timer not connected to IO-APIC" boot
# message (which the kit's warning filter matches; emitted by some TCG boots)
# counts as a pass.
kit_ok() { # RC LOG
	[ "$1" = 0 ] && return 0
	local reasons
	reasons=$(sed -n 's/^lhp: RESULT FAIL ([a-z-]*): //p' "$2")
	[ "$reasons" = "guest kernel warnings" ] || return 1
	! grep -a '^  LHP DMESG' "$2" | grep -aiE 'warning|bug:|oops|call trace' | grep -qv 'MP-BIOS bug: 8254 timer not connected'
}

NAMES=() RESULTS=() TIMES=() NOTES=()
FAILED=0
record() { # NAME PASS|FAIL SECONDS NOTE
	NAMES+=("$1") RESULTS+=("$2") TIMES+=("$3") NOTES+=("$4")
	[ "$2" = PASS ] || FAILED=1
	printf 'linux-interop: %-16s %s (%ss) %s\n' "$1" "$2" "$3" "$4"
}

# check COND MESSAGE: appends MESSAGE to WHY unless COND (an arithmetic
# expression) holds.
WHY=
check() { (($1)) || WHY="$WHY; $2"; }

# Common checks after a case: Linux's and our counters.
common_checks() { # LOG
	local log=$1 v
	for v in short_packets unknown_packet_types; do
		check "$(gmetric "$log" $v) == 0" "linux $v=$(gmetric "$log" $v)"
	done
	for v in malformed_dropped invalid_dropped data_beyond_grant; do
		check "$(hmetric "$log" $v | tr -- - 0) == 0" "ours $v=$(hmetric "$log" $v)"
	done
	grep -q '^HOMARS DONE' "$log" || WHY="$WHY; the host side did not finish"
}

# run_kit NAME MODE ARGS... -- HOST_CMD...: runs the kit; leaves RC and LOG.
# A guest that did not boot (a busy host: TCG boots take 5-20 s, minutes
# when the machine is overloaded) is tried once more; that is the
# environment, not a result.
run_kit() {
	local name=$1 mode=$2 try
	shift 2
	LOG=$OUT/$name.log
	for try in 1 2; do
		"$KIT/run.sh" "$mode" --boot-timeout 300 "$@" >"$LOG.run" 2>&1
		RC=$?
		grep -qE '^lhp: (guest not ready within|qemu exited during boot)' "$LOG.run" || break
		echo "linux-interop: $name: the guest did not boot; trying again"
	done
	# The whole console (HOMA_METRIC lines) after the runner's output.
	cat "$LOG.run" >"$LOG"
	rm -f "$LOG.run"
	[ -f "$OUT/$name.console" ] && tr -d '\r' <"$OUT/$name.console" | grep -a '^HOMA_METRIC' >>"$LOG"
}

# nft rules, as a shell snippet for HOST_CMD (runs inside the namespace):
# drop PCT% of protocol-146 packets in each direction.
loss_rules() { # PCT
	echo "nft add table ip lhploss && nft add chain ip lhploss in '{ type filter hook input priority 0; }' && nft add chain ip lhploss out '{ type filter hook output priority 0; }' && nft add rule ip lhploss in ip protocol 146 numgen random mod 100 '<' $1 counter drop && nft add rule ip lhploss out ip protocol 146 numgen random mod 100 '<' $1 counter drop"
}
DROPPED='nft list table ip lhploss | awk "/counter/ { for (i = 1; i < NF; i++) if (\$i == \"packets\") s += \$(i + 1) } END { print \"HOMARS NFT dropped=\" s }"'

# ---- cases ----
# guest-server: a Linux echo server; our client.
case_server_sizes() { # every size twice, one at a time, the runtime's default timers
	local t=$SECONDS n
	run_kit server_sizes guest-server --quiet --log "$OUT/server_sizes.console" -- \
		"$BIN" client 10.146.0.2:5000 --sizes $SIZES --rounds 2 --stay 1
	WHY=
	kit_ok $RC "$LOG" || WHY="$WHY; kit: $(grep -a 'RESULT' "$LOG" | tail -n 1)"
	common_checks "$LOG"
	n=$(grep -c '^HOMARS RPC OK' "$LOG")
	check "$n == 20" "ok $n/20"
	# The client shuts down at once after its last response while another
	# endpoint of the process stays 1 s: its shutdown must have sent the
	# acks it owed (else Linux sends NEED_ACK every tick, hundreds in that
	# second, and hpeer lingers with the RPC unacknowledged).
	grep -q 'HPEER LINGER' "$LOG" && WHY="$WHY; $(grep -a 'HPEER LINGER' "$LOG" | sed 's/^ *//')"
	check "$(gmetric "$LOG" packets_sent_NEED_ACK) <= 20" "linux NEED_ACKs $(gmetric "$LOG" packets_sent_NEED_ACK)"
	check "$(gmetric "$LOG" rpc_timeouts) == 0" "linux rpc_timeouts $(gmetric "$LOG" rpc_timeouts)"
	check "$(hmetric "$LOG" peers_dead) == 0" "ours peers_dead $(hmetric "$LOG" peers_dead)"
	record server_sizes "$([ -z "$WHY" ] && echo PASS || echo FAIL)" $((SECONDS - t)) \
		"ok=$n linux: DATA=$(gmetric "$LOG" packets_sent_DATA) resent=$(gmetric "$LOG" resent_packets) NEED_ACK=$(gmetric "$LOG" packets_sent_NEED_ACK) ours: straddled=$(hmetric "$LOG" data_straddling_grant) RESEND=$(hmetric "$LOG" sent_RESEND)${WHY:+ |$WHY}"
}

# Withheld grants: our client grants 2 of its 8 responses at a time, so
# the others wait; with the runtime's default timers (a silent peer is dead
# after ~105 ms) every waiting RPC depends on Linux answering our probes
# (BUSY) and on our repeated grant keeping Linux's own 100 ms timeout away.
case_server_conc() { # 8 outstanding, 4 rounds of 1 B .. 1 MB
	local t=$SECONDS n
	run_kit server_conc guest-server --quiet --log "$OUT/server_conc.console" -- \
		"$BIN" client 10.146.0.2:5000 --sizes 1,1425,60000,1000000 --rounds 4 --conc 8 --max-overcommit 2
	WHY=
	kit_ok $RC "$LOG" || WHY="$WHY; kit: $(grep -a 'RESULT' "$LOG" | tail -n 1)"
	common_checks "$LOG"
	n=$(grep -c '^HOMARS RPC OK' "$LOG")
	check "$n == 16" "ok $n/16"
	grep -q 'HPEER LINGER' "$LOG" && WHY="$WHY; $(grep -a 'HPEER LINGER' "$LOG" | sed 's/^ *//')"
	check "$(gmetric "$LOG" rpc_timeouts) == 0" "linux rpc_timeouts $(gmetric "$LOG" rpc_timeouts)"
	check "$(hmetric "$LOG" peers_dead) == 0" "ours peers_dead $(hmetric "$LOG" peers_dead)"
	record server_conc "$([ -z "$WHY" ] && echo PASS || echo FAIL)" $((SECONDS - t)) \
		"ok=$n linux: DATA=$(gmetric "$LOG" packets_sent_DATA) resent=$(gmetric "$LOG" resent_packets) BUSY=$(gmetric "$LOG" packets_sent_BUSY) ours: RESEND=$(hmetric "$LOG" sent_RESEND) BUSY rcvd=$(hmetric "$LOG" rcvd_BUSY)${WHY:+ |$WHY}"
}

# guest-client: a Linux client; our echo server.
case_client_sizes() {
	local t=$SECONDS
	run_kit client_sizes guest-client --server-port 4000 --sizes $SIZES --rounds 2 --quiet \
		--log "$OUT/client_sizes.console" -- \
		sh -c "exec '$BIN' server \$LHP_HOST_ADDR:\$LHP_PORT --count \$LHP_COUNT $LENIENT"
	WHY=
	kit_ok $RC "$LOG" || WHY="$WHY; kit: $(grep -a 'RESULT' "$LOG" | tail -n 1)"
	common_checks "$LOG"
	check "$(hmetric "$LOG" active_rpcs) == 0" "ours: $(hmetric "$LOG" active_rpcs) RPCs unacked"
	check "$(gmetric "$LOG" rpc_timeouts) == 0" "linux rpc_timeouts $(gmetric "$LOG" rpc_timeouts)"
	record client_sizes "$([ -z "$WHY" ] && echo PASS || echo FAIL)" $((SECONDS - t)) \
		"$(grep -a '^  HPEER DONE' "$LOG" | sed 's/^ *HPEER //') ours: NEED_ACK=$(hmetric "$LOG" sent_NEED_ACK) acks=$(hmetric "$LOG" acks_received) straddled=$(hmetric "$LOG" data_straddling_grant)${WHY:+ |$WHY}"
}

case_client_conc() { # 16 outstanding at the Linux client; we grant 2 at a time, default timers
	local t=$SECONDS
	run_kit client_conc guest-client --server-port 4000 --sizes 1,1425,60000,1000000 --rounds 8 \
		--conc 16 --quiet --log "$OUT/client_conc.console" -- \
		sh -c "exec '$BIN' server \$LHP_HOST_ADDR:\$LHP_PORT --count \$LHP_COUNT --max-overcommit 2"
	WHY=
	kit_ok $RC "$LOG" || WHY="$WHY; kit: $(grep -a 'RESULT' "$LOG" | tail -n 1)"
	common_checks "$LOG"
	check "$(gmetric "$LOG" rpc_timeouts) == 0" "linux rpc_timeouts $(gmetric "$LOG" rpc_timeouts)"
	check "$(hmetric "$LOG" peers_dead) == 0" "ours peers_dead $(hmetric "$LOG" peers_dead)"
	check "$(hmetric "$LOG" timeouts) == 0 || $(gmetric "$LOG" packets_sent_BUSY) > 0" "our $(hmetric "$LOG" timeouts) timer rounds got no BUSY"
	record client_conc "$([ -z "$WHY" ] && echo PASS || echo FAIL)" $((SECONDS - t)) \
		"$(grep -a '^  HPEER DONE' "$LOG" | sed 's/^ *HPEER //') ours: RESEND=$(hmetric "$LOG" sent_RESEND) GRANT=$(hmetric "$LOG" sent_GRANT) linux: BUSY=$(gmetric "$LOG" packets_sent_BUSY) RESEND=$(gmetric "$LOG" packets_sent_RESEND)${WHY:+ |$WHY}"
}

# 0 bytes: Linux cannot send an empty message (homa_message_out_fill:
# "message has length zero") and drops an empty DATA (homa_add_packet), so
# our 0-byte request stays unanswered; the guest answers our RESENDs with
# BUSY, so we must not declare it dead, and the RPC ends by our own timeout.
case_zero() {
	local t=$SECONDS n
	run_kit zero guest-server --quiet --log "$OUT/zero.console" -- \
		"$BIN" client 10.146.0.2:5000 --sizes 0,1 --rpc-timeout 2 --expect-unanswered 0 $LENIENT
	WHY=
	kit_ok $RC "$LOG" || WHY="$WHY; kit: $(grep -a 'RESULT' "$LOG" | tail -n 1)"
	common_checks "$LOG"
	grep -q 'HOMARS EXPECT .*: met' "$LOG" || WHY="$WHY; $(grep -a 'HOMARS EXPECT' "$LOG")"
	check "$(hmetric "$LOG" rcvd_BUSY) > 0" "no BUSY from Linux"
	check "$(hmetric "$LOG" peers_dead) == 0" "ours peers_dead $(hmetric "$LOG" peers_dead)"
	record zero_bytes "$([ -z "$WHY" ] && echo PASS || echo FAIL)" $((SECONDS - t)) \
		"0 B unanswered (Linux keeps it: $(grep -a 'HPEER LINGER' "$LOG" | sed 's/^ *HPEER //')), BUSY rcvd=$(hmetric "$LOG" rcvd_BUSY), 1 B ok${WHY:+ |$WHY}"
}

# Loss: nftables in the namespace drops LOSS% of protocol-146 packets each way.
case_loss_server() {
	local t=$SECONDS n
	run_kit loss_server guest-server --quiet --log "$OUT/loss_server.console" -- \
		sh -c "$(loss_rules "$LOSS") && '$BIN' client 10.146.0.2:5000 --sizes 1,1425,60000,250000,1000000 --rounds 2 --conc 2 $LENIENT; rc=\$?; $DROPPED; exit \$rc"
	WHY=
	kit_ok $RC "$LOG" || WHY="$WHY; kit: $(grep -a 'RESULT' "$LOG" | tail -n 1)"
	common_checks "$LOG"
	n=$(grep -c '^HOMARS RPC OK' "$LOG")
	check "$n == 10" "ok $n/10"
	local dropped
	dropped=$(sed -n 's/^HOMARS NFT dropped=//p' "$LOG")
	check "${dropped:-0} > 0" "nft dropped nothing"
	check "$(gmetric "$LOG" resent_packets) > 0" "linux resent nothing"
	record loss_server "$([ -z "$WHY" ] && echo PASS || echo FAIL)" $((SECONDS - t)) \
		"ok=$n nft dropped=${dropped:-?} linux: resent=$(gmetric "$LOG" resent_packets) RESEND=$(gmetric "$LOG" packets_sent_RESEND) ours: RESEND=$(hmetric "$LOG" sent_RESEND) retransmitted=$(hmetric "$LOG" data_bytes_retransmitted)B${WHY:+ |$WHY}"
}

case_loss_client() {
	local t=$SECONDS
	run_kit loss_client guest-client --server-port 4000 --sizes 1,1425,60000,250000,1000000 --rounds 2 \
		--conc 2 --quiet --log "$OUT/loss_client.console" --host-grace 8 -- \
		sh -c "$(loss_rules "$LOSS") && '$BIN' server \$LHP_HOST_ADDR:\$LHP_PORT --count \$LHP_COUNT --linger 5 $LENIENT; rc=\$?; $DROPPED; exit \$rc"
	WHY=
	kit_ok $RC "$LOG" || WHY="$WHY; kit: $(grep -a 'RESULT' "$LOG" | tail -n 1)"
	common_checks "$LOG"
	local dropped
	dropped=$(sed -n 's/^HOMARS NFT dropped=//p' "$LOG")
	check "${dropped:-0} > 0" "nft dropped nothing"
	record loss_client "$([ -z "$WHY" ] && echo PASS || echo FAIL)" $((SECONDS - t)) \
		"$(grep -a '^  HPEER DONE' "$LOG" | sed 's/^ *HPEER //') nft dropped=${dropped:-?} linux: RESEND=$(gmetric "$LOG" packets_sent_RESEND) resent=$(gmetric "$LOG" resent_packets) ours: retransmitted=$(hmetric "$LOG" data_bytes_retransmitted)B${WHY:+ |$WHY}"
}

# The Linux peer goes away mid-run: after 4 RPCs every protocol-146 packet
# is dropped both ways (the guest keeps running, so the kit stays up). Our
# client must fail the rest with "peer dead" within its bound (~1 s with
# these timers), not hang.
case_away() {
	local t=$SECONDS
	run_kit away guest-server --quiet --log "$OUT/away.console" -- \
		sh -c "'$BIN' client 10.146.0.2:5000 --sizes 1000000,5000 --rounds 20 --conc 2 --expect-ok 4 --max-fail-ms 3000 --rpc-timeout 20 $LENIENT >'$OUT/away.client' 2>&1 & p=\$!
		while [ \$(grep -c 'RPC OK' '$OUT/away.client') -lt 4 ] && kill -0 \$p 2>/dev/null; do sleep 0.02; done
		nft add table ip lhpaway && nft add chain ip lhpaway in '{ type filter hook input priority 0; }' && nft add chain ip lhpaway out '{ type filter hook output priority 0; }' && nft add rule ip lhpaway in ip protocol 146 drop && nft add rule ip lhpaway out ip protocol 146 drop
		t0=\$(date +%s%N); wait \$p; rc=\$?; t1=\$(date +%s%N)
		cat '$OUT/away.client'; rm -f '$OUT/away.client'
		echo HOMARS AWAY client_exit_after_cut_ms=\$(((t1 - t0) / 1000000)); exit \$rc"
	WHY=
	kit_ok $RC "$LOG" || WHY="$WHY; kit: $(grep -a 'RESULT' "$LOG" | tail -n 1)"
	common_checks "$LOG"
	grep -q 'HOMARS EXPECT .*: met' "$LOG" || WHY="$WHY; $(grep -a 'HOMARS EXPECT' "$LOG")"
	local after fails
	after=$(sed -n 's/^HOMARS AWAY client_exit_after_cut_ms=//p' "$LOG")
	fails=$(grep -c '^HOMARS RPC FAIL .*error=peer-dead' "$LOG")
	check "${after:-99999} <= 3000" "client ended ${after:-?} ms after the cut"
	check "$fails > 0" "no RPC failed"
	record peer_goes_away "$([ -z "$WHY" ] && echo PASS || echo FAIL)" $((SECONDS - t)) \
		"ok=$(grep -c '^HOMARS RPC OK' "$LOG") peer-dead=$fails, client done ${after:-?} ms after the cut; linux rpc_timeouts=$(gmetric "$LOG" rpc_timeouts)${WHY:+ |$WHY}"
}

# The Linux server closes its socket mid-run (hpeer stops after 4 requests,
# keeps the two it has not read for its 5 s linger, answering our RESENDs
# with BUSY, then closes): Linux answers what follows with ICMP
# port-unreachable, and our client must fail the rest at once. (The guest
# powers off about 0.3 s after the close; the kit fails a run whose host
# command outlives it, so this also bounds how prompt we are.)
case_closes() {
	local t=$SECONDS fails
	run_kit closes guest-server --quiet --count 4 --log "$OUT/closes.console" -- \
		"$BIN" client 10.146.0.2:5000 --sizes 5000 --rounds 20 --conc 2 --expect-ok 4 --max-fail-ms 10000 $LENIENT
	WHY=
	kit_ok $RC "$LOG" || WHY="$WHY; kit: $(grep -a 'RESULT' "$LOG" | tail -n 1)"
	common_checks "$LOG"
	grep -q 'HOMARS EXPECT .*: met' "$LOG" || WHY="$WHY; $(grep -a 'HOMARS EXPECT' "$LOG")"
	fails=$(grep -c '^HOMARS RPC FAIL .*error=peer-dead' "$LOG")
	check "$fails > 0" "no RPC failed"
	check "$(hmetric "$LOG" unreachable_rpcs) > 0" "no RPC ended by ICMP"
	record peer_closes "$([ -z "$WHY" ] && echo PASS || echo FAIL)" $((SECONDS - t)) \
		"ok=$(grep -c '^HOMARS RPC OK' "$LOG") peer-dead=$fails, ended by ICMP: $(hmetric "$LOG" unreachable_rpcs); $(grep -a 'HPEER LINGER' "$LOG" | sed 's/^ *HPEER //')${WHY:+ |$WHY}"
}

# ByteDance mode on our side (docs/protocol-notes.md, "ByteDance mode"):
# our DATA carry the mode's flag (bit 3 of the flags byte, which Linux
# zeroes and never reads), and we probe only peers whose DATA carry it, so
# Linux must never receive an RTT_PROBE: its unknown_packet_types stays 0
# (common_checks, and the kit's own metric check) while RPCs succeed both
# ways, several outstanding at once.
bd_checks() { # LOG
	local log=$1
	grep -q '^HOMARS MODE bytedance' "$log" || WHY="$WHY; the host side did not run the mode"
	check "$(hmetric "$log" rtt_probes_sent) == 0" "ours: $(hmetric "$log" rtt_probes_sent) RTT probes sent to Linux"
	check "$(hmetric "$log" sent_RTT_PROBE | tr -- - 0) == 0" "ours: RTT_PROBE packets sent"
	check "$(hmetric "$log" rtt_probes_answered) == 0" "ours: answered $(hmetric "$log" rtt_probes_answered) probes"
	check "$(gmetric "$log" rpc_timeouts) == 0" "linux rpc_timeouts $(gmetric "$log" rpc_timeouts)"
}
case_bd_server() { # our client in the mode; a Linux echo server
	local t=$SECONDS n
	run_kit bd_server guest-server --quiet --log "$OUT/bd_server.console" -- \
		"$BIN" client 10.146.0.2:5000 --sizes $SIZES --rounds 2 --conc 4 --stay 1 --bytedance $LENIENT
	WHY=
	kit_ok $RC "$LOG" || WHY="$WHY; kit: $(grep -a 'RESULT' "$LOG" | tail -n 1)"
	common_checks "$LOG"
	bd_checks "$LOG"
	n=$(grep -c '^HOMARS RPC OK' "$LOG")
	check "$n == 20" "ok $n/20"
	record bd_server "$([ -z "$WHY" ] && echo PASS || echo FAIL)" $((SECONDS - t)) \
		"ok=$n linux: unknown_packet_types=$(gmetric "$LOG" unknown_packet_types) DATA=$(gmetric "$LOG" packets_sent_DATA) ours: RTT_PROBE sent=$(hmetric "$LOG" rtt_probes_sent)${WHY:+ |$WHY}"
}
case_bd_client() { # a Linux client; our echo server in the mode
	local t=$SECONDS
	run_kit bd_client guest-client --server-port 4000 --sizes $SIZES --rounds 2 --conc 4 --quiet \
		--log "$OUT/bd_client.console" -- \
		sh -c "exec '$BIN' server \$LHP_HOST_ADDR:\$LHP_PORT --count \$LHP_COUNT --bytedance $LENIENT"
	WHY=
	kit_ok $RC "$LOG" || WHY="$WHY; kit: $(grep -a 'RESULT' "$LOG" | tail -n 1)"
	common_checks "$LOG"
	bd_checks "$LOG"
	record bd_client "$([ -z "$WHY" ] && echo PASS || echo FAIL)" $((SECONDS - t)) \
		"$(grep -a '^  HPEER DONE' "$LOG" | sed 's/^ *HPEER //') linux: unknown_packet_types=$(gmetric "$LOG" unknown_packet_types) ours: RTT_PROBE sent=$(hmetric "$LOG" rtt_probes_sent)${WHY:+ |$WHY}"
}

ALL="server_sizes server_conc client_sizes client_conc zero loss_server loss_client away closes bd_server bd_client"
CASES=${*:-$ALL}
for c in $CASES; do
	case " $ALL " in *" $c "*) ;; *) echo "linux-interop: unknown case $c (cases: $ALL)"; exit 2 ;; esac
done
echo "linux-interop: kit $KIT, host side $BIN, logs in $OUT"
for c in $CASES; do "case_$c"; done

echo
echo "linux-interop: results (HomaModule $(sed -n 's/^HomaModule source: PlatformLab\/HomaModule, commit \([0-9a-f]\{12\}\).*/\1/p' "$KIT/BUILDINFO" 2>/dev/null), loss cases at ${LOSS}%)"
printf '  %-16s %-6s %5s  %s\n' case result secs notes
for i in "${!NAMES[@]}"; do
	printf '  %-16s %-6s %5s  %s\n' "${NAMES[$i]}" "${RESULTS[$i]}" "${TIMES[$i]}" "${NOTES[$i]}"
done
echo "linux-interop: $((SECONDS - T_START)) s in all"
passed=0
for r in "${RESULTS[@]}"; do [ "$r" = PASS ] && passed=$((passed + 1)); done
echo "linux-interop: $passed passed, $((${#RESULTS[@]} - passed)) failed"
if [ "$FAILED" = 0 ]; then
	[ "$KEEP_OUT" = 1 ] || rm -rf "$OUT"
	exit 0
fi
echo "linux-interop: logs kept in $OUT"
exit 1
