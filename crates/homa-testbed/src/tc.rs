//! Queueing disciplines: the commands that build them and their counters.
//!
//! Switch egress port `p{i}` (towards host `i`):
//!
//! ```text
//! htb 1: (default 1:10)
//! └── class 1:1   rate = ceil = link rate
//!     ├── class 1:10  prio 7  → bfifo 10:   Homa priority 0 (TOS 0x00)
//!     ├── …
//!     └── class 1:17  prio 0  → bfifo 17:   Homa priority 7 (TOS 0xE0)
//! ```
//!
//! Each leaf is guaranteed only 8 bit/s (the least `tc` accepts), so every
//! leaf borrows from `1:1`, and HTB lends to borrowers in `prio` order:
//! strict priority. u32 filters on the top three TOS bits pick the leaf.
//!
//! Host NIC `eth0`: `htb 1:` with one class `1:1` at the link rate and a
//! `bfifo` under it, a FIFO without priorities.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use tracing::warn;

use crate::netns::{run, TestbedSpec};

/// Number of Homa priority levels, and of queues per switch port.
pub const PRIORITIES: u8 = 8;

/// Bytes of Ethernet header that the qdiscs count on top of the IP packet.
pub const ETHERNET_HEADER: u64 = 14;

/// Extra shaper bucket, in microseconds of the link rate, on top of two
/// frames; it absorbs the lateness of the shaper's timer. See
/// [`htb_burst_bytes`].
pub const BURST_SLACK_MICROS: u64 = 50;

/// Guaranteed rate of each priority leaf: the least `tc` accepts.
pub const LEAF_RATE: &str = "8bit";

/// Size of the largest frame the qdiscs see.
pub fn frame_bytes(spec: &TestbedSpec) -> u64 {
    u64::from(spec.mtu) + ETHERNET_HEADER
}

/// HTB `burst` and `cburst`: two frames plus [`BURST_SLACK_MICROS`] at the
/// link rate.
///
/// HTB lets a class run its tokens into debt by one packet and releases
/// the next packet when the debt is paid, so a bucket of one frame already
/// holds the rate when the timer fires on time. The timer of a VM fires
/// tens of microseconds late; the slack keeps the tokens earned meanwhile
/// instead of capping them away, and the second frame covers a full-size
/// packet right after an idle period. A bucket much larger would let a port
/// send above the link rate after idling.
pub fn htb_burst_bytes(spec: &TestbedSpec) -> u64 {
    2 * frame_bytes(spec) + spec.rate_bytes_per_sec() * BURST_SLACK_MICROS / 1_000_000
}

/// HTB `quantum`: one full frame. Every leaf has its own `prio`, so the
/// quantum never shares bandwidth; it is set only so `tc` derives none
/// from `r2q` and warns.
pub fn quantum_bytes(spec: &TestbedSpec) -> u64 {
    frame_bytes(spec)
}

/// The TOS byte of a Homa priority: `priority << 5`.
pub fn tos_of(priority: u8) -> u8 {
    (priority & 7) << 5
}

/// HTB class id of the queue of Homa priority `priority` (`1:10`..`1:17`).
pub fn class_id(priority: u8) -> String {
    format!("1:1{priority}")
}

fn args(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// `tc` arguments (run in the switch namespace) that build the queues of
/// switch port `p{port}`.
pub fn switch_port_commands(spec: &TestbedSpec, port: usize) -> Vec<Vec<String>> {
    let dev = format!("p{port}");
    let rate = format!("{}mbit", spec.rate_mbit);
    let burst = htb_burst_bytes(spec).to_string();
    let quantum = quantum_bytes(spec).to_string();
    let limit = spec.buffer_bytes.to_string();
    let levels = spec.switch_levels.clamp(1, PRIORITIES);
    let mut cmds = vec![
        // Unclassified (non-IP) traffic goes to the lowest priority.
        args(&[
            "qdisc", "replace", "dev", &dev, "root", "handle", "1:", "htb", "default", "10",
        ]),
        args(&[
            "class", "add", "dev", &dev, "parent", "1:", "classid", "1:1", "htb", "rate", &rate,
            "ceil", &rate, "burst", &burst, "cburst", &burst, "quantum", &quantum,
        ]),
    ];
    for p in 0..levels {
        let class = class_id(p);
        let htb_prio = (PRIORITIES - 1 - p).to_string();
        let handle = format!("1{p}:");
        let tos = format!("0x{:02x}", tos_of(p));
        // `burst 1`: the leaf's own bucket stays below one packet, so the
        // leaf always borrows and the priorities decide.
        cmds.push(args(&[
            "class", "add", "dev", &dev, "parent", "1:1", "classid", &class, "htb", "rate",
            LEAF_RATE, "ceil", &rate, "burst", "1", "cburst", &burst, "prio", &htb_prio, "quantum",
            &quantum,
        ]));
        cmds.push(args(&[
            "qdisc", "add", "dev", &dev, "parent", &class, "handle", &handle, "bfifo", "limit",
            &limit,
        ]));
        // One FIFO: everything takes the default class, whatever its TOS.
        if levels > 1 {
            cmds.push(args(&[
                "filter", "add", "dev", &dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                "match", "ip", "tos", &tos, "0xe0", "flowid", &class,
            ]));
        }
    }
    cmds
}

/// `tc` arguments (run in a host namespace) that build the NIC queue of
/// `eth0`.
pub fn host_nic_commands(spec: &TestbedSpec) -> Vec<Vec<String>> {
    let rate = format!("{}mbit", spec.rate_mbit);
    let burst = htb_burst_bytes(spec).to_string();
    let quantum = quantum_bytes(spec).to_string();
    let limit = spec.host_queue_bytes.to_string();
    vec![
        args(&[
            "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1",
        ]),
        args(&[
            "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate", &rate,
            "ceil", &rate, "burst", &burst, "cburst", &burst, "quantum", &quantum,
        ]),
        args(&[
            "qdisc", "add", "dev", "eth0", "parent", "1:1", "handle", "10:", "bfifo", "limit",
            &limit,
        ]),
    ]
}

/// Counters of one priority queue of one switch port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassStats {
    /// Switch port, which is also the receiving host's index.
    pub port: usize,
    /// Homa priority, 0 (lowest) to 7.
    pub priority: u8,
    /// Bytes sent, Ethernet header included.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Packets dropped because the queue was full.
    pub drops: u64,
    /// Bytes waiting now.
    pub backlog_bytes: u64,
    /// Packets waiting now.
    pub backlog_packets: u64,
    /// Times HTB held the class back for lack of tokens.
    pub overlimits: u64,
}

/// Counters of one host's NIC queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicStats {
    /// Host index.
    pub host: usize,
    /// Bytes sent, Ethernet header included.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Packets dropped because the queue was full.
    pub drops: u64,
}

/// Counters of one qdisc, from `tc -s -j qdisc show`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QdiscStats {
    /// Kind, e.g. `htb` or `bfifo`.
    pub kind: String,
    /// Handle, e.g. `10:`.
    pub handle: String,
    /// Parent class, e.g. `1:10`; `None` for the root.
    pub parent: Option<String>,
    /// Bytes sent.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Packets dropped.
    pub drops: u64,
    /// Overlimit events.
    pub overlimits: u64,
    /// Bytes queued.
    pub backlog_bytes: u64,
    /// Packets queued.
    pub backlog_packets: u64,
}

#[derive(Deserialize)]
struct RawQdisc {
    kind: String,
    handle: String,
    #[serde(default)]
    parent: Option<String>,
    #[serde(default)]
    bytes: u64,
    #[serde(default)]
    packets: u64,
    #[serde(default)]
    drops: u64,
    #[serde(default)]
    overlimits: u64,
    #[serde(default)]
    backlog: u64,
    #[serde(default)]
    qlen: u64,
}

/// Parses the output of `tc -s -j qdisc show dev DEV`.
pub fn parse_qdisc_json(text: &str) -> Result<Vec<QdiscStats>> {
    let raw: Vec<RawQdisc> =
        serde_json::from_str(text.trim()).context("parsing `tc -s -j qdisc show` output")?;
    Ok(raw
        .into_iter()
        .map(|q| QdiscStats {
            kind: q.kind,
            handle: q.handle,
            parent: q.parent,
            bytes: q.bytes,
            packets: q.packets,
            drops: q.drops,
            overlimits: q.overlimits,
            backlog_bytes: q.backlog,
            backlog_packets: q.qlen,
        })
        .collect())
}

/// Counters of one HTB class, from `tc -s class show`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HtbClassStats {
    /// Class id, e.g. `1:10`.
    pub class_id: String,
    /// Parent class id; `None` for a class under the root qdisc.
    pub parent: Option<String>,
    /// Bytes sent.
    pub bytes: u64,
    /// Packets sent.
    pub packets: u64,
    /// Packets dropped.
    pub drops: u64,
    /// Times the class was held back.
    pub overlimits: u64,
}

fn parse_count(word: &str, what: &str) -> Result<u64> {
    word.trim_end_matches([',', ')'])
        .parse()
        .with_context(|| format!("bad {what} {word:?} in `tc -s class show` output"))
}

/// Parses the text output of `tc -s class show dev DEV`. (iproute2 6.1
/// prints HTB classes as text even with `-j`, so the text is what there
/// is.)
pub fn parse_class_text(text: &str) -> Result<Vec<HtbClassStats>> {
    let mut classes: Vec<HtbClassStats> = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first() {
            Some(&"class") => {
                let class_id = words
                    .get(2)
                    .ok_or_else(|| anyhow!("class line without an id: {line:?}"))?;
                let parent = words
                    .iter()
                    .position(|w| *w == "parent")
                    .and_then(|i| words.get(i + 1))
                    .map(|p| p.to_string());
                classes.push(HtbClassStats {
                    class_id: class_id.to_string(),
                    parent,
                    bytes: 0,
                    packets: 0,
                    drops: 0,
                    overlimits: 0,
                });
            }
            // " Sent B bytes P pkt (dropped D, overlimits O requeues R)"
            Some(&"Sent") => {
                let class = classes
                    .last_mut()
                    .ok_or_else(|| anyhow!("counters before any class: {line:?}"))?;
                let after = |key: &str| -> Result<u64> {
                    let i = words
                        .iter()
                        .position(|w| w.trim_start_matches('(') == key)
                        .ok_or_else(|| anyhow!("no {key:?} in {line:?}"))?;
                    let value = match key {
                        // "Sent B bytes": the number precedes the unit.
                        "bytes" | "pkt" => i.checked_sub(1).and_then(|j| words.get(j)),
                        _ => words.get(i + 1),
                    };
                    parse_count(value.ok_or_else(|| anyhow!("no {key} in {line:?}"))?, key)
                };
                class.bytes = after("bytes")?;
                class.packets = after("pkt")?;
                class.drops = after("dropped")?;
                class.overlimits = after("overlimits")?;
            }
            _ => {}
        }
    }
    Ok(classes)
}

/// Combines the class text and qdisc JSON of switch port `port` into one
/// [`ClassStats`] per priority queue (`levels` of them: 8, or 1 for a
/// FIFO port). Counters, drops and backlog come from the bfifo under each
/// class (drops happen there); overlimits from the class.
pub fn port_stats_from(
    port: usize,
    levels: u8,
    class_text: &str,
    qdisc_json: &str,
) -> Result<Vec<ClassStats>> {
    let classes = parse_class_text(class_text)?;
    let qdiscs = parse_qdisc_json(qdisc_json)?;
    (0..levels)
        .map(|p| {
            let id = class_id(p);
            let leaf = qdiscs
                .iter()
                .find(|q| q.parent.as_deref() == Some(id.as_str()))
                .ok_or_else(|| {
                    anyhow!(
                        "switch port p{port} has no queue under class {id}; not a testbed port?"
                    )
                })?;
            let overlimits = classes
                .iter()
                .find(|c| c.class_id == id)
                .map_or(0, |c| c.overlimits);
            Ok(ClassStats {
                port,
                priority: p,
                bytes: leaf.bytes,
                packets: leaf.packets,
                drops: leaf.drops,
                backlog_bytes: leaf.backlog_bytes,
                backlog_packets: leaf.backlog_packets,
                overlimits,
            })
        })
        .collect()
}

/// Turns the qdisc JSON of host `host`'s `eth0` into [`NicStats`], from the
/// root HTB (whose drops include those of the queue under it).
pub fn nic_stats_from(host: usize, qdisc_json: &str) -> Result<NicStats> {
    let qdiscs = parse_qdisc_json(qdisc_json)?;
    let root = qdiscs
        .iter()
        .find(|q| q.parent.is_none() && q.handle == "1:")
        .ok_or_else(|| anyhow!("host {host}'s eth0 has no root qdisc 1:; not a testbed host?"))?;
    Ok(NicStats {
        host,
        bytes: root.bytes,
        packets: root.packets,
        drops: root.drops,
    })
}

fn tc_output(ns: &str, args: &[&str]) -> Result<String> {
    let mut cmd = Command::new("tc");
    cmd.arg("-n").arg(ns).args(args);
    run(&mut cmd)
}

fn port_qdisc_json(spec: &TestbedSpec, port: usize) -> Result<String> {
    let dev = format!("p{port}");
    tc_output(
        &spec.switch_ns(),
        &["-s", "-j", "qdisc", "show", "dev", &dev],
    )
}

/// Counters of every priority queue of every switch port, ordered by port
/// then priority.
pub fn switch_port_stats(spec: &TestbedSpec) -> Result<Vec<ClassStats>> {
    let sw = spec.switch_ns();
    let mut all = Vec::with_capacity(spec.hosts * usize::from(PRIORITIES));
    for port in 0..spec.hosts {
        let dev = format!("p{port}");
        let classes = tc_output(&sw, &["-s", "class", "show", "dev", &dev])?;
        let qdiscs = port_qdisc_json(spec, port)?;
        all.extend(port_stats_from(
            port,
            spec.switch_levels,
            &classes,
            &qdiscs,
        )?);
    }
    Ok(all)
}

/// Counters of every host's NIC queue, ordered by host.
pub fn host_nic_stats(spec: &TestbedSpec) -> Result<Vec<NicStats>> {
    (0..spec.hosts)
        .map(|host| {
            let json = tc_output(
                &spec.host_ns(host),
                &["-s", "-j", "qdisc", "show", "dev", "eth0"],
            )?;
            nic_stats_from(host, &json)
        })
        .collect()
}

/// `after - before` for every (port, priority) of `after`; the backlog is
/// `after`'s, since it is a level rather than a counter.
pub fn delta(before: &[ClassStats], after: &[ClassStats]) -> Vec<ClassStats> {
    after
        .iter()
        .map(|a| {
            match before
                .iter()
                .find(|b| b.port == a.port && b.priority == a.priority)
            {
                Some(b) => ClassStats {
                    bytes: a.bytes.saturating_sub(b.bytes),
                    packets: a.packets.saturating_sub(b.packets),
                    drops: a.drops.saturating_sub(b.drops),
                    overlimits: a.overlimits.saturating_sub(b.overlimits),
                    ..*a
                },
                None => *a,
            }
        })
        .collect()
}

/// Polls the switch queues in a background thread and keeps the largest
/// backlog seen in each.
pub struct BacklogSampler {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<BTreeMap<(usize, u8), u64>>,
}

impl BacklogSampler {
    /// Starts polling every switch port of `spec` every `interval`. Each
    /// poll costs one `tc` process per port.
    pub fn start(spec: &TestbedSpec, interval: Duration) -> BacklogSampler {
        let spec = spec.clone();
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = thread::spawn(move || {
            let mut max: BTreeMap<(usize, u8), u64> = (0..spec.hosts)
                .flat_map(|port| (0..spec.switch_levels).map(move |p| ((port, p), 0)))
                .collect();
            let mut warned = false;
            loop {
                let polled = Instant::now();
                if let Err(e) = sample_backlogs(&spec, &mut max) {
                    // One warning is enough; the testbed is probably gone.
                    if !warned {
                        warn!("sampling switch backlogs: {e:#}");
                        warned = true;
                    }
                }
                let wait = interval.saturating_sub(polled.elapsed());
                match stopped.recv_timeout(wait) {
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    _ => break,
                }
            }
            max
        });
        BacklogSampler { stop, thread }
    }

    /// Stops polling and returns `(port, priority, largest backlog in
    /// bytes)` for every queue, ordered by port then priority.
    pub fn stop(self) -> Vec<(usize, u8, u64)> {
        // The thread may already be gone; then the send fails harmlessly.
        let _ = self.stop.send(());
        match self.thread.join() {
            Ok(max) => max.into_iter().map(|((port, p), b)| (port, p, b)).collect(),
            Err(_) => {
                warn!("backlog sampler thread panicked");
                Vec::new()
            }
        }
    }
}

fn sample_backlogs(spec: &TestbedSpec, max: &mut BTreeMap<(usize, u8), u64>) -> Result<()> {
    for port in 0..spec.hosts {
        let qdiscs = parse_qdisc_json(&port_qdisc_json(spec, port)?)?;
        for p in 0..spec.switch_levels {
            let id = class_id(p);
            let Some(leaf) = qdiscs
                .iter()
                .find(|q| q.parent.as_deref() == Some(id.as_str()))
            else {
                bail!("switch port p{port} has no queue under class {id}");
            };
            let entry = max.entry((port, p)).or_insert(0);
            *entry = (*entry).max(leaf.backlog_bytes);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured on this kind of machine (iproute2 6.1) from switch port p1 of
    // a 3-host testbed at 100 Mbit/s: hosts 0 and 2 blast 9000-byte
    // datagrams at priority 0 into host 1, host 2 also 1000-byte datagrams
    // at priority 7.
    const CLASS_TEXT: &str = r#"class htb 1:11 parent 1:1 leaf 11: prio 6 rate 8bit ceil 100Mbit burst 1b cburst 18637b 
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
 lended: 0 borrowed: 0 giants: 0
 tokens: 15625000 ctokens: 23312

class htb 1:10 parent 1:1 leaf 10: prio 7 rate 8bit ceil 100Mbit burst 1b cburst 18637b 
 Sent 9194280 bytes 1020 pkt (dropped 1836, overlimits 2 requeues 0) 
 backlog 396616b 44p requeues 0
 lended: 1 borrowed: 1019 giants: 0
 tokens: -916357605 ctokens: 11971

class htb 1:1 root rate 100Mbit ceil 100Mbit burst 18637b cburst 18637b 
 Sent 17188504 bytes 8692 pkt (dropped 0, overlimits 8636 requeues 0) 
 backlog 0b 0p requeues 0
 lended: 8690 borrowed: 0 giants: 0
 tokens: -11055 ctokens: -11055

class htb 1:13 parent 1:1 leaf 13: prio 4 rate 8bit ceil 100Mbit burst 1b cburst 18637b 
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
 lended: 0 borrowed: 0 giants: 0
 tokens: 15625000 ctokens: 23312

class htb 1:12 parent 1:1 leaf 12: prio 5 rate 8bit ceil 100Mbit burst 1b cburst 18637b 
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
 lended: 0 borrowed: 0 giants: 0
 tokens: 15625000 ctokens: 23312

class htb 1:15 parent 1:1 leaf 15: prio 2 rate 8bit ceil 100Mbit burst 1b cburst 18637b 
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
 lended: 0 borrowed: 0 giants: 0
 tokens: 15625000 ctokens: 23312

class htb 1:14 parent 1:1 leaf 14: prio 3 rate 8bit ceil 100Mbit burst 1b cburst 18637b 
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
 lended: 0 borrowed: 0 giants: 0
 tokens: 15625000 ctokens: 23312

class htb 1:17 parent 1:1 leaf 17: prio 0 rate 8bit ceil 100Mbit burst 1b cburst 18637b 
 Sent 7994224 bytes 7672 pkt (dropped 0, overlimits 234 requeues 0) 
 backlog 0b 0p requeues 0
 lended: 1 borrowed: 7671 giants: 0
 tokens: -916072024 ctokens: 15542

class htb 1:16 parent 1:1 leaf 16: prio 1 rate 8bit ceil 100Mbit burst 1b cburst 18637b 
 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) 
 backlog 0b 0p requeues 0
 lended: 0 borrowed: 0 giants: 0
 tokens: 15625000 ctokens: 23312

"#;

    const QDISC_JSON: &str = r#"[{"kind":"htb","handle":"1:","root":true,"refcnt":3,"options":{"r2q":10,"default":"0x10","direct_packets_stat":0,"direct_qlen":1000},"bytes":17249568,"packets":8720,"drops":1842,"overlimits":8900,"requeues":0,"backlog":405994,"qlen":53},{"kind":"bfifo","handle":"15:","parent":"1:15","options":{"limit":400000},"bytes":0,"packets":0,"drops":0,"overlimits":0,"requeues":0,"backlog":0,"qlen":0},{"kind":"bfifo","handle":"17:","parent":"1:17","options":{"limit":400000},"bytes":8019232,"packets":7696,"drops":0,"overlimits":0,"requeues":0,"backlog":9378,"qlen":9},{"kind":"bfifo","handle":"10:","parent":"1:10","options":{"limit":400000},"bytes":9230336,"packets":1024,"drops":1842,"overlimits":0,"requeues":0,"backlog":396616,"qlen":44},{"kind":"bfifo","handle":"14:","parent":"1:14","options":{"limit":400000},"bytes":0,"packets":0,"drops":0,"overlimits":0,"requeues":0,"backlog":0,"qlen":0},{"kind":"bfifo","handle":"12:","parent":"1:12","options":{"limit":400000},"bytes":0,"packets":0,"drops":0,"overlimits":0,"requeues":0,"backlog":0,"qlen":0},{"kind":"bfifo","handle":"16:","parent":"1:16","options":{"limit":400000},"bytes":0,"packets":0,"drops":0,"overlimits":0,"requeues":0,"backlog":0,"qlen":0},{"kind":"bfifo","handle":"11:","parent":"1:11","options":{"limit":400000},"bytes":0,"packets":0,"drops":0,"overlimits":0,"requeues":0,"backlog":0,"qlen":0},{"kind":"bfifo","handle":"13:","parent":"1:13","options":{"limit":400000},"bytes":0,"packets":0,"drops":0,"overlimits":0,"requeues":0,"backlog":0,"qlen":0}]"#;

    // Host 0's eth0 at the same moment.
    const NIC_JSON: &str = r#"[{"kind":"htb","handle":"1:","root":true,"refcnt":3,"options":{"r2q":10,"default":"0x1","direct_packets_stat":0,"direct_qlen":1000},"bytes":17063502,"packets":1893,"drops":0,"overlimits":1889,"requeues":0,"backlog":72112,"qlen":8},{"kind":"bfifo","handle":"10:","parent":"1:1","options":{"limit":1000000},"bytes":17063502,"packets":1893,"drops":0,"overlimits":0,"requeues":0,"backlog":72112,"qlen":8}]"#;

    #[test]
    fn burst_and_quantum_at_the_defaults() {
        let spec = TestbedSpec::default();
        assert_eq!(frame_bytes(&spec), 9014);
        // 50 µs at 400 Mbit/s is 2,500 bytes.
        assert_eq!(htb_burst_bytes(&spec), 2 * 9014 + 2500);
        let slow = TestbedSpec {
            rate_mbit: 100,
            ..spec.clone()
        };
        assert_eq!(htb_burst_bytes(&slow), 2 * 9014 + 625);
        assert_eq!(quantum_bytes(&spec), 9014);
    }

    #[test]
    fn priorities_map_to_tos_and_classes() {
        assert_eq!(tos_of(0), 0x00);
        assert_eq!(tos_of(7), 0xe0);
        assert_eq!(class_id(0), "1:10");
        assert_eq!(class_id(7), "1:17");
        let cmds = switch_port_commands(&TestbedSpec::default(), 2);
        assert_eq!(cmds.len(), 2 + 3 * 8);
        let top = cmds
            .iter()
            .find(|c| c.contains(&"1:17".to_string()) && c[0] == "class")
            .expect("class 1:17");
        let prio = top.iter().position(|w| w == "prio").expect("prio");
        assert_eq!(top[prio + 1], "0");
        let filter = cmds
            .iter()
            .find(|c| c[0] == "filter" && c.contains(&"1:17".to_string()))
            .expect("filter for 1:17");
        assert!(filter
            .join(" ")
            .contains("match ip tos 0xe0 0xe0 flowid 1:17"));
        assert!(cmds.iter().all(|c| c.contains(&"p2".to_string())));
    }

    #[test]
    fn a_fifo_port_has_one_queue_and_no_filters() {
        let spec = TestbedSpec {
            switch_levels: 1,
            ..TestbedSpec::default()
        };
        let cmds = switch_port_commands(&spec, 0);
        assert_eq!(cmds.len(), 2 + 2);
        assert!(cmds.iter().all(|c| c[0] != "filter"));
        // Everything lands in the default class, which has the one bfifo.
        assert!(cmds[0].join(" ").ends_with("htb default 10"));
        assert!(cmds
            .iter()
            .any(|c| c[0] == "qdisc" && c.join(" ").contains("parent 1:10 handle 10: bfifo")));
    }

    #[test]
    fn parses_captured_class_text() {
        let classes = parse_class_text(CLASS_TEXT).expect("parse");
        assert_eq!(classes.len(), 9);
        let root = classes.iter().find(|c| c.class_id == "1:1").expect("1:1");
        assert_eq!(root.parent, None);
        assert_eq!((root.bytes, root.packets), (17_188_504, 8692));
        let low = classes.iter().find(|c| c.class_id == "1:10").expect("1:10");
        assert_eq!(low.parent.as_deref(), Some("1:1"));
        assert_eq!(
            (low.bytes, low.packets, low.drops, low.overlimits),
            (9_194_280, 1020, 1836, 2)
        );
        let high = classes.iter().find(|c| c.class_id == "1:17").expect("1:17");
        assert_eq!(high.overlimits, 234);
    }

    #[test]
    fn parses_captured_qdisc_json() {
        let qdiscs = parse_qdisc_json(QDISC_JSON).expect("parse");
        assert_eq!(qdiscs.len(), 9);
        assert_eq!(qdiscs[0].kind, "htb");
        assert_eq!(qdiscs[0].parent, None);
        assert_eq!(qdiscs[0].drops, 1842);
        let low = qdiscs.iter().find(|q| q.handle == "10:").expect("10:");
        assert_eq!(low.kind, "bfifo");
        assert_eq!(low.parent.as_deref(), Some("1:10"));
        assert_eq!((low.backlog_bytes, low.backlog_packets), (396_616, 44));
    }

    #[test]
    fn combines_port_stats_from_bfifo_and_class() {
        let stats = port_stats_from(1, PRIORITIES, CLASS_TEXT, QDISC_JSON).expect("stats");
        assert_eq!(stats.len(), 8);
        assert!(stats.iter().all(|c| c.port == 1));
        assert_eq!(
            stats[0],
            ClassStats {
                port: 1,
                priority: 0,
                bytes: 9_230_336,
                packets: 1024,
                drops: 1842,
                backlog_bytes: 396_616,
                backlog_packets: 44,
                overlimits: 2,
            }
        );
        assert_eq!(
            stats[7],
            ClassStats {
                port: 1,
                priority: 7,
                bytes: 8_019_232,
                packets: 7696,
                drops: 0,
                backlog_bytes: 9378,
                backlog_packets: 9,
                overlimits: 234,
            }
        );
        for c in &stats[1..7] {
            assert_eq!((c.bytes, c.packets, c.drops, c.backlog_bytes), (0, 0, 0, 0));
        }
    }

    #[test]
    fn parses_captured_nic_json() {
        let nic = nic_stats_from(0, NIC_JSON).expect("nic");
        assert_eq!(
            nic,
            NicStats {
                host: 0,
                bytes: 17_063_502,
                packets: 1893,
                drops: 0
            }
        );
    }

    #[test]
    fn rejects_what_is_not_a_testbed() {
        assert!(parse_qdisc_json("not json").is_err());
        assert!(parse_qdisc_json("[]").expect("empty list").is_empty());
        // A port without the priority queues, e.g. the default qdisc.
        let bare = r#"[{"kind":"noqueue","handle":"0:","root":true,"refcnt":2,"options":{},"bytes":0,"packets":0,"drops":0,"overlimits":0,"requeues":0,"backlog":0,"qlen":0}]"#;
        assert!(port_stats_from(0, PRIORITIES, "", bare).is_err());
        assert!(nic_stats_from(0, bare).is_err());
        assert!(
            parse_class_text(" Sent 1 bytes 1 pkt (dropped 0, overlimits 0 requeues 0)").is_err()
        );
        assert!(parse_class_text("class htb 1:10 parent 1:1\n Sent x bytes").is_err());
    }

    #[test]
    fn delta_subtracts_counters_and_keeps_the_backlog() {
        let before = port_stats_from(1, PRIORITIES, CLASS_TEXT, QDISC_JSON).expect("stats");
        let mut after = before.clone();
        after[0].bytes += 9014;
        after[0].packets += 1;
        after[0].drops += 3;
        after[0].overlimits += 5;
        after[0].backlog_bytes = 42;
        let d = delta(&before, &after);
        assert_eq!(d.len(), 8);
        assert_eq!(
            (
                d[0].bytes,
                d[0].packets,
                d[0].drops,
                d[0].overlimits,
                d[0].backlog_bytes
            ),
            (9014, 1, 3, 5, 42)
        );
        assert_eq!((d[7].bytes, d[7].backlog_bytes), (0, 9378));
        // Counters that went backwards (a rebuilt testbed) give zero.
        let d = delta(&after, &before);
        assert_eq!(d[0].bytes, 0);
        // A queue missing before counts from zero.
        let d = delta(&[], &after);
        assert_eq!(d, after);
    }
}
