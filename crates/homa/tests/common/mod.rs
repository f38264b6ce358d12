//! Helpers shared by the integration tests: message patterns, an echo
//! server that cleans up after itself, root/tool checks, a network
//! namespace guard and time bounds.
#![allow(dead_code)] // each test binary uses a different subset

use bytes::Bytes;
use homa::{Config, Endpoint, Error, Transport};
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A generous per-RPC timeout: far above anything a healthy run needs, so a
/// hang shows up as a failed call rather than a stuck test.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// True when the tests run as root (raw IP, namespaces, nftables).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A message of `len` bytes whose content depends on `tag`, so a response
/// carrying another RPC's bytes (or shifted bytes) is caught.
pub fn pattern(tag: u64, len: usize) -> Bytes {
    let mut x = tag
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(len as u64);
    let mut v = Vec::with_capacity(len);
    for _ in 0..len {
        // xorshift64: cheap and every byte differs from its neighbours.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push((x >> 24) as u8);
    }
    Bytes::from(v)
}

/// Asserts that `got` equals `want`, reporting the first differing byte
/// instead of dumping megabytes.
pub fn assert_bytes(want: &[u8], got: &[u8], what: &str) {
    if want == got {
        return;
    }
    let first = want
        .iter()
        .zip(got.iter())
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()));
    panic!(
        "{what}: response differs: want {} bytes, got {} bytes, first difference at byte {first}",
        want.len(),
        got.len()
    );
}

/// The per-packet payload the runtime will use for `config` over
/// `transport`/family, computed as the runtime does: mtu − lower header −
/// 56 (Homa DATA header).
pub fn max_payload(config: &Config, addr: SocketAddr) -> usize {
    let lower = match (config.transport, addr) {
        (Transport::Raw, _) => 20,
        (Transport::Udp, SocketAddr::V4(_)) => 28,
        (Transport::Udp, SocketAddr::V6(_)) => 48,
        (other, _) => panic!("no header size known for transport {other:?}"),
    };
    config.core.mtu as usize - lower - homa_wire::DATA_HEADER_LEN
}

/// An echo server: `threads` workers answer every request with its own
/// bytes. Dropping it shuts the endpoint down, joins the workers and
/// releases the socket (the port can be bound again afterwards).
pub struct EchoServer {
    pub ep: Option<Endpoint>,
    pub addr: SocketAddr,
    workers: Vec<JoinHandle<()>>,
    stopping: Arc<AtomicBool>,
}

impl EchoServer {
    pub fn start(ep: Endpoint, threads: usize) -> EchoServer {
        EchoServer::start_with_delay(ep, threads, Duration::ZERO)
    }

    /// Like [`EchoServer::start`], but each worker waits `delay` before it
    /// replies (a slow service keeps RPCs outstanding).
    pub fn start_with_delay(ep: Endpoint, threads: usize, delay: Duration) -> EchoServer {
        let addr = ep.local_addr();
        let stopping = Arc::new(AtomicBool::new(false));
        let workers = (0..threads)
            .map(|i| {
                let s = ep.clone();
                let stopping = stopping.clone();
                std::thread::Builder::new()
                    .name(format!("echo-{}-{i}", addr.port()))
                    .spawn(move || loop {
                        match s.recv_request(None) {
                            // After shutdown, requests still queued are
                            // handed out; they cannot be answered.
                            Ok(_) if stopping.load(Ordering::Acquire) => break,
                            Ok(req) => {
                                if !delay.is_zero() {
                                    std::thread::sleep(delay);
                                }
                                match s.reply(req.id, req.message) {
                                    Ok(()) | Err(Error::Closed) => {}
                                    Err(e) => panic!("echo reply failed: {e}"),
                                }
                            }
                            Err(Error::Closed) => break,
                            Err(e) => panic!("echo recv_request failed: {e}"),
                        }
                    })
                    .expect("spawn echo worker")
            })
            .collect();
        EchoServer {
            ep: Some(ep),
            addr,
            workers,
            stopping,
        }
    }

    pub fn bind(addr: SocketAddr, config: Config, threads: usize) -> EchoServer {
        EchoServer::start(
            Endpoint::bind(addr, config).expect("bind echo server"),
            threads,
        )
    }

    pub fn endpoint(&self) -> &Endpoint {
        self.ep.as_ref().expect("server running")
    }

    /// Shuts down, joins the workers and drops the endpoint; returns once
    /// the socket is closed. Panics if a worker panicked.
    pub fn stop(mut self) {
        self.stop_inner(true);
    }

    fn stop_inner(&mut self, check: bool) {
        self.stopping.store(true, Ordering::Release);
        if let Some(ep) = self.ep.take() {
            ep.shutdown();
        }
        for w in self.workers.drain(..) {
            let r = w.join();
            if check && r.is_err() {
                panic!("an echo worker panicked");
            }
        }
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        // Do not panic in a drop that may run during unwinding.
        self.stop_inner(false);
    }
}

/// A DATA packet made by hand (the whole message's `incoming` granted).
pub fn data_packet(
    sport: u16,
    dport: u16,
    sender_id: u64,
    len: u32,
    offset: u32,
    payload: &[u8],
) -> Vec<u8> {
    homa_wire::Packet {
        common: homa_wire::CommonHeader {
            sport,
            dport,
            sender_id,
        },
        body: homa_wire::Body::Data {
            header: homa_wire::DataHeader {
                message_length: len,
                incoming: len,
                offset,
                ..homa_wire::DataHeader::default()
            },
            payload,
        },
    }
    .to_vec()
}

/// A control packet made by hand.
pub fn control(sport: u16, dport: u16, sender_id: u64, body: homa_wire::Body<'static>) -> Vec<u8> {
    homa_wire::Packet {
        common: homa_wire::CommonHeader {
            sport,
            dport,
            sender_id,
        },
        body,
    }
    .to_vec()
}

/// Polls `f` until it returns true or `limit` passes; returns whether it
/// succeeded.
pub fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Runs a command, returning stdout or an error naming the command.
pub fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd} {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// True if `name` is an executable on PATH (or in /usr/sbin, /sbin).
pub fn have_tool(name: &str) -> bool {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"])
        .any(|d| std::path::Path::new(d).join(name).is_file());
    found
}

const NETNS_PREFIX: &str = "homa-it-";

/// A network namespace of our own with its loopback up; deleted on drop
/// (also when the test panics). Declare it before the endpoints that live
/// in it so that they are dropped first.
pub struct NetNs {
    pub name: String,
}

impl NetNs {
    pub fn create(tag: &str) -> Result<NetNs, String> {
        remove_stale_namespaces();
        let pid = std::process::id();
        let name = format!("{NETNS_PREFIX}{pid}-{tag}");
        run("ip", &["netns", "add", &name])?;
        // From here on the guard deletes it whatever happens.
        let ns = NetNs { name };
        ns.exec("ip", &["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Runs a command inside the namespace.
    pub fn exec(&self, cmd: &str, args: &[&str]) -> Result<String, String> {
        let mut all = vec!["netns", "exec", &self.name, cmd];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// Runs `nft -f -` inside the namespace with `ruleset` on stdin.
    pub fn nft(&self, ruleset: &str) -> Result<(), String> {
        use std::io::Write;
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.name, "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("nft: {e}"))?;
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(ruleset.as_bytes())
            .map_err(|e| format!("nft stdin: {e}"))?;
        let out = child.wait_with_output().map_err(|e| format!("nft: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "nft -f - failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }

    /// Runs `f` on a fresh thread that has entered the namespace: sockets
    /// it opens belong to the namespace (and stay there whatever thread
    /// later uses them).
    pub fn run_inside<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, String> {
        let path = format!("/var/run/netns/{}", self.name);
        std::thread::spawn(move || -> Result<T, String> {
            let file = std::fs::File::open(&path).map_err(|e| format!("open {path}: {e}"))?;
            use std::os::fd::AsRawFd;
            // SAFETY: setns on a valid namespace fd; it changes only the
            // network namespace of this (fresh, short-lived) thread.
            let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            if r != 0 {
                return Err(format!("setns: {}", std::io::Error::last_os_error()));
            }
            Ok(f())
        })
        .join()
        .map_err(|_| "thread inside the namespace panicked".to_string())?
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        if let Err(e) = run("ip", &["netns", "del", &self.name]) {
            eprintln!("warning: could not delete namespace {}: {e}", self.name);
        }
    }
}

/// Deletes namespaces left by earlier runs of these tests that were killed
/// before their guards ran (their process no longer exists). Namespaces of
/// live processes are left alone.
fn remove_stale_namespaces() {
    let Ok(list) = run("ip", &["netns", "list"]) else {
        return;
    };
    for line in list.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(rest) = name.strip_prefix(NETNS_PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = run("ip", &["netns", "del", name]);
        }
    }
}

impl NetNs {
    /// The packet counts of the rules of `table` (family `family`) that
    /// carry a counter and a `comment "name"`, by name.
    pub fn nft_counters(
        &self,
        family: &str,
        table: &str,
    ) -> Result<std::collections::BTreeMap<String, u64>, String> {
        let rules = self.exec("nft", &["list", "table", family, table])?;
        let mut out = std::collections::BTreeMap::new();
        for line in rules.lines() {
            let Some(i) = line.find("counter packets ") else {
                continue;
            };
            let Some(n) = line[i + 16..]
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            let Some(c) = line.find("comment \"") else {
                continue;
            };
            let name = line[c + 9..].split('"').next().unwrap_or_default();
            out.insert(name.to_string(), n);
        }
        Ok(out)
    }
}

/// Why a test that needs root, `ip` and `nft` cannot run here, if it
/// cannot.
pub fn netns_nft_unavailable() -> Option<&'static str> {
    if !is_root() {
        return Some("needs root (network namespaces, nftables)");
    }
    if !have_tool("ip") {
        return Some("the `ip` binary is missing (iproute2)");
    }
    if !have_tool("nft") {
        return Some("the `nft` binary is missing (apt-get install nftables)");
    }
    None
}

/// A UDP socket with IP_RECVTOS (IPv4) or IPV6_RECVTCLASS (IPv6) on: a
/// stand-in peer that sees the TOS / traffic class byte of each datagram.
pub struct UdpStandIn {
    sock: UdpSocket,
    v6: bool,
}

impl UdpStandIn {
    /// Binds to an ephemeral port of `ip` ("127.0.0.1", "[::1]").
    pub fn bind(ip: &str) -> UdpStandIn {
        let sock = UdpSocket::bind(format!("{ip}:0")).unwrap();
        let v6 = sock.local_addr().unwrap().is_ipv6();
        let (level, name) = if v6 {
            (libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS)
        } else {
            (libc::IPPROTO_IP, libc::IP_RECVTOS)
        };
        let one: libc::c_int = 1;
        // SAFETY: sets an int option on a socket we own.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                level,
                name,
                &one as *const libc::c_int as *const libc::c_void,
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0, "setsockopt: {}", io::Error::last_os_error());
        UdpStandIn { sock, v6 }
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.sock.local_addr().unwrap()
    }

    /// The next datagram and its TOS / traffic class byte, or None after
    /// `timeout`.
    pub fn recv(&self, timeout: Duration) -> Option<(Vec<u8>, u8)> {
        self.sock.set_read_timeout(Some(timeout)).unwrap();
        let mut buf = vec![0u8; 65_536];
        let mut cmsg = [0u64; 16];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: all-zero is a valid msghdr; the pointers set below refer
        // to live buffers for the duration of recvmsg.
        let mut msg: libc::msghdr = unsafe { zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = size_of::<[u64; 16]>() as _;
        // SAFETY: msg describes live buffers.
        let n = unsafe { libc::recvmsg(self.sock.as_raw_fd(), &mut msg, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            assert!(
                matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ),
                "recvmsg: {e}"
            );
            return None;
        }
        let mut tos = None;
        // SAFETY: CMSG_* walk the control buffer the kernel filled.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let data = libc::CMSG_DATA(c);
                match ((*c).cmsg_level, (*c).cmsg_type) {
                    (libc::IPPROTO_IP, libc::IP_TOS) if !self.v6 => tos = Some(*data),
                    (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) if self.v6 => {
                        tos = Some(std::ptr::read_unaligned(data as *const libc::c_int) as u8)
                    }
                    _ => {}
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        buf.truncate(n as usize);
        Some((buf, tos.expect("the kernel reported no TOS/traffic class")))
    }

    /// Sends a datagram to `to`.
    pub fn send(&self, packet: &[u8], to: SocketAddr) {
        self.sock.send_to(packet, to).unwrap();
    }
}
