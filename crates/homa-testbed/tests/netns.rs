//! End-to-end tests of the testbed: they build real namespaces, so they
//! need root and iproute2; without them each test says why and passes.
//! Every test uses its own prefix and removes its testbed even on failure.

use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use homa_testbed::netns::{self, command_in, TestbedSpec};
use homa_testbed::tc::{self, BacklogSampler, ClassStats};

fn tool_works(tool: &str, arg: &str) -> bool {
    Command::new(tool)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Why this test cannot run here, if it cannot.
fn skip_reason(needs_python: bool) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    for tool in ["ip", "tc", "bridge"] {
        if !tool_works(tool, "-V") {
            return Some(format!("`{tool}` is missing"));
        }
    }
    if needs_python && !tool_works("python3", "--version") {
        return Some("python3 is missing".into());
    }
    None
}

macro_rules! require_env {
    ($needs_python:expr) => {
        if let Some(why) = skip_reason($needs_python) {
            eprintln!("skipping: {why}");
            return;
        }
    };
}

/// A prefix unique to this test and this process.
fn prefix(tag: &str) -> String {
    format!("t{tag}{}", std::process::id() % 100_000)
}

/// Removes the testbed when the test ends, however it ends.
struct Testbed {
    prefix: String,
}

impl Testbed {
    fn new(tag: &str) -> Testbed {
        Testbed {
            prefix: prefix(tag),
        }
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Err(e) = netns::down(&self.prefix) {
            eprintln!("cleanup of {}: {e:#}", self.prefix);
        }
    }
}

/// Kills and reaps background processes when the test ends.
#[derive(Default)]
struct Procs(Vec<Child>);

impl Procs {
    fn spawn(&mut self, mut cmd: Command) {
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn background process");
        self.0.push(child);
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn testbed_bin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_testbed"))
        .args(args)
        .output()
        .expect("run the testbed binary")
}

fn all_namespaces() -> String {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn assert_gone(prefix: &str) {
    let listed = all_namespaces();
    let ours: Vec<&str> = listed
        .lines()
        .filter(|l| l.starts_with(&format!("{prefix}-")))
        .collect();
    assert!(ours.is_empty(), "namespaces left behind: {ours:?}");
    assert!(
        !netns::state_path(prefix).exists(),
        "state file left behind"
    );
}

fn small_spec(prefix: &str, hosts: usize) -> TestbedSpec {
    TestbedSpec {
        prefix: prefix.to_string(),
        hosts,
        rate_mbit: 100,
        ..TestbedSpec::default()
    }
}

fn python_in(ns: &str, code: &str, args: &[&str]) -> Command {
    let mut all = vec!["-c", code];
    all.extend_from_slice(args);
    command_in(ns, "python3", all)
}

fn port_class(stats: &[ClassStats], port: usize, priority: u8) -> ClassStats {
    *stats
        .iter()
        .find(|c| c.port == port && c.priority == priority)
        .expect("queue present")
}

#[test]
fn cli_up_is_idempotent_and_down_removes_everything() {
    require_env!(false);
    let tb = Testbed::new("cli");
    let p = tb.prefix.as_str();
    let up = ["up", "--hosts", "2", "--rate-mbit", "100", "--prefix", p];

    let out = testbed_bin(&up);
    assert!(
        out.status.success(),
        "up: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = vec![format!("{p}-sw"), format!("{p}-h0"), format!("{p}-h1")];
    assert_eq!(netns::namespaces(p), expected);
    assert!(netns::exists(p));

    let out = testbed_bin(&["status", "--prefix", p, "--json"]);
    assert!(
        out.status.success(),
        "status: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    assert_eq!(status["namespaces"].as_array().map(Vec::len), Some(3));
    assert_eq!(status["spec"]["hosts"], 2);
    assert_eq!(status["spec"]["rate_mbit"], 100);
    assert_eq!(status["ports"].as_array().map(Vec::len), Some(16));
    let out = testbed_bin(&["status", "--prefix", p]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("{p}-h1")), "status table: {text}");
    assert_eq!(
        netns::load_spec(p).expect("state file"),
        Some(small_spec(p, 2))
    );

    let out = testbed_bin(&up);
    assert!(
        out.status.success(),
        "second up: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(netns::namespaces(p), expected);

    let out = testbed_bin(&["down", "--prefix", p]);
    assert!(
        out.status.success(),
        "down: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("removed"));
    assert_gone(p);

    let out = testbed_bin(&["down", "--prefix", p]);
    assert!(
        out.status.success(),
        "second down: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("was not up"));
    assert!(!netns::down(p).expect("library down"));
}

/// Sends `count[p]` datagrams at Homa priority `p` from the namespace to
/// `dst`; the low TOS bits are set too, to show that only the top three
/// select the queue.
const SEND_BY_PRIORITY: &str = r#"
import socket, sys
dst = sys.argv[1]
for p in range(8):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, (p << 5) | 0x08)
    for _ in range(int(sys.argv[2 + p])):
        s.sendto(b"x" * 200, (dst, 9))
    s.close()
"#;

#[test]
fn tos_selects_the_priority_queue() {
    require_env!(true);
    let tb = Testbed::new("prio");
    let spec = small_spec(&tb.prefix, 2);
    netns::up(&spec).expect("up");

    // Priority p gets 10 + p datagrams, so every queue's count is distinct.
    let counts: Vec<String> = (0..8u64).map(|p| (10 + p).to_string()).collect();
    let mut args = vec![spec.host_ip(1).to_string()];
    args.extend(counts.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = python_in(&spec.host_ns(0), SEND_BY_PRIORITY, &args)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "sender: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The sender's NIC is idle, so everything is through within a moment.
    thread::sleep(Duration::from_millis(200));
    let stats = tc::switch_port_stats(&spec).expect("stats");
    assert_eq!(stats.len(), 16);
    for p in 0..8u8 {
        let c = port_class(&stats, 1, p);
        // Exact counts: the links carry nothing else (no ARP, no IPv6).
        assert_eq!(c.packets, 10 + u64::from(p), "port 1 priority {p}: {c:?}");
        assert_eq!(c.drops, 0);
    }
    let nics = tc::host_nic_stats(&spec).expect("nic stats");
    assert_eq!(nics[0].packets, (10..18).sum::<u64>());
}

/// Sends full-size datagrams as fast as the socket allows, for argv[2]
/// seconds, at TOS 0.
const BLAST: &str = r#"
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
buf = b"x" * int(sys.argv[3])
end = time.time() + float(sys.argv[2])
while time.time() < end:
    for _ in range(50):
        try:
            s.sendto(buf, (sys.argv[1], 9))
        except OSError:
            pass
"#;

/// Echoes datagrams on port 7000 until killed.
const ECHO: &str = r#"
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 7000))
while True:
    d, a = s.recvfrom(2048)
    s.sendto(d, a)
"#;

/// Sends argv[2] pings at TOS 0xE0 (priority 7), 25 ms apart, and prints
/// the round-trip times in ms (-1 for a lost one), space-separated.
const PING_HIGH: &str = r#"
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0xE0)
s.settimeout(0.5)
out = []
for i in range(int(sys.argv[2])):
    t = time.monotonic()
    s.sendto(str(i).encode(), (sys.argv[1], 7000))
    try:
        while s.recv(2048) != str(i).encode():
            pass
        out.append((time.monotonic() - t) * 1000)
    except socket.timeout:
        out.append(-1)
    time.sleep(0.025)
print(" ".join("%.3f" % x for x in out))
"#;

#[test]
fn port_holds_the_link_rate_and_serves_priority_seven_first() {
    require_env!(true);
    let tb = Testbed::new("rate");
    let spec = TestbedSpec {
        hosts: 4,
        ..small_spec(&tb.prefix, 4)
    };
    netns::up(&spec).expect("up");
    let dst = spec.host_ip(1).to_string();
    let mut procs = Procs::default();
    procs.spawn(python_in(&spec.host_ns(1), ECHO, &[]));
    // Two senders at the full link rate into port 1: twice what it can
    // carry, so priority 0 there stays backlogged.
    let datagram = (spec.mtu - 28).to_string();
    for host in [0, 2] {
        procs.spawn(python_in(
            &spec.host_ns(host),
            BLAST,
            &[&dst, "3", &datagram],
        ));
    }
    thread::sleep(Duration::from_millis(500));

    let sampler = BacklogSampler::start(&spec, Duration::from_millis(50));
    let before = tc::switch_port_stats(&spec).expect("stats");
    let t0 = Instant::now();
    // Priority-7 pings from an idle host into the congested port.
    let pinger = python_in(&spec.host_ns(3), PING_HIGH, &[&dst, "20"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pinger");
    thread::sleep(Duration::from_millis(1000));
    let after = tc::switch_port_stats(&spec).expect("stats");
    let elapsed = t0.elapsed().as_secs_f64();
    let pings = pinger.wait_with_output().expect("pinger");
    let max_backlog = sampler.stop();
    drop(procs);

    let d = tc::delta(&before, &after);
    let port1: u64 = d.iter().filter(|c| c.port == 1).map(|c| c.bytes).sum();
    let rate = port1 as f64 / elapsed;
    let link = spec.rate_bytes_per_sec() as f64;
    eprintln!(
        "port 1: {:.1} Mbit/s of {} Mbit/s",
        rate * 8.0 / 1e6,
        spec.rate_mbit
    );
    assert!(
        (0.85 * link..=1.15 * link).contains(&rate),
        "port 1 carried {rate:.0} B/s, link is {link:.0} B/s"
    );

    let low = port_class(&d, 1, 0);
    let high = port_class(&d, 1, 7);
    assert!(low.drops > 0, "priority 0 never overflowed: {low:?}");
    assert_eq!(high.drops, 0, "priority 7 lost packets: {high:?}");
    let low_backlog = max_backlog
        .iter()
        .find(|(port, p, _)| *port == 1 && *p == 0)
        .map_or(0, |(_, _, b)| *b);
    assert_eq!(max_backlog.len(), 4 * 8);
    // At least half the buffer: 16 ms of queueing for priority 0.
    assert!(
        low_backlog >= spec.buffer_bytes / 2,
        "priority 0 backlog only {low_backlog} B"
    );

    let text = String::from_utf8_lossy(&pings.stdout);
    assert!(
        pings.status.success(),
        "pinger: {}",
        String::from_utf8_lossy(&pings.stderr)
    );
    let mut rtts: Vec<f64> = text
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(rtts.len(), 20, "pinger output: {text}");
    let lost = rtts.iter().filter(|r| **r < 0.0).count();
    rtts.retain(|r| *r >= 0.0);
    rtts.sort_by(f64::total_cmp);
    let median = rtts.get(rtts.len() / 2).copied().unwrap_or(f64::MAX);
    let low_delay_ms = low_backlog as f64 / link * 1000.0;
    eprintln!(
        "priority 7 RTT median {median:.2} ms ({lost} lost) while priority 0 queued \
         {low_delay_ms:.1} ms"
    );
    assert!(lost <= 2, "{lost} of 20 priority-7 pings lost: {text}");
    assert!(
        median < low_delay_ms / 2.0,
        "priority 7 RTT median {median:.2} ms vs {low_delay_ms:.1} ms of priority 0 queue"
    );
}

#[test]
fn failed_up_leaves_nothing_behind() {
    require_env!(false);
    let tb = Testbed::new("fail");
    let p = tb.prefix.as_str();

    // Refused before anything is created.
    let invalid = TestbedSpec {
        hosts: 1,
        ..small_spec(p, 2)
    };
    assert!(netns::up(&invalid).is_err());
    assert_gone(p);
    let out = testbed_bin(&["up", "--hosts", "1", "--prefix", p]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("hosts"));
    assert_gone(p);
    let out = testbed_bin(&["up", "--prefix", "Bad-Prefix"]);
    assert!(!out.status.success());

    // Refused by tc halfway through: the bfifo limit does not fit 32 bits.
    let halfway = TestbedSpec {
        buffer_bytes: 1 << 40,
        ..small_spec(p, 3)
    };
    let err = netns::up_unchecked(&halfway).expect_err("tc must refuse");
    let msg = format!("{err:#}");
    assert!(msg.contains("bfifo limit 1099511627776"), "{msg}");
    assert!(msg.contains("Illegal"), "tc's stderr missing: {msg}");
    assert_gone(p);
}
