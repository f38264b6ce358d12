//! `testbed sird-sniff`: counts, per source host, the Homa DATA packets a
//! switch port sends towards its host and how many carry SIRD's
//! congested-sender bit (`csn`). Runs in the switch namespace with a
//! packet socket on the port; reads only headers.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use homa_wire::{Body, Packet, DATA_FLAG_CSN, DATA_FLAG_SIRD};
use serde::{Deserialize, Serialize};

/// Options of `testbed sird-sniff`.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct SniffArgs {
    /// Interface to watch (a switch port, e.g. `p1`).
    #[arg(long)]
    pub dev: String,
    /// Seconds to wait before counting.
    #[arg(long, default_value_t = 0.0)]
    pub delay: f64,
    /// Seconds to count.
    #[arg(long)]
    pub seconds: f64,
    /// Where to write the counts (JSON).
    #[arg(long)]
    pub out: PathBuf,
}

/// DATA packets from one source host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlagCounts {
    /// Homa DATA packets.
    pub data: u64,
    /// Of those, with the SIRD bit.
    pub sird: u64,
    /// Of those, with `csn`.
    pub csn: u64,
}

/// The source address and DATA flags of an Ethernet frame carrying a Homa
/// DATA packet over UDP/IPv4, or `None` for anything else (headers only:
/// the frame may be truncated after the Homa DATA header).
pub fn data_flags(frame: &[u8]) -> Option<(Ipv4Addr, u8)> {
    const ETH: usize = 14;
    if frame.len() < ETH + 20 || frame[12..14] != [0x08, 0x00] {
        return None;
    }
    let ip = &frame[ETH..];
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if ip[0] >> 4 != 4 || ihl < 20 || ip[9] != 17 || ip.len() < ihl + 8 {
        return None;
    }
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    match Packet::parse(&ip[ihl + 8..]).ok()?.body {
        Body::Data { header, .. } => Some((src, header.flags)),
        _ => None,
    }
}

/// Adds one frame to `counts` (keyed by source address).
pub fn count(counts: &mut BTreeMap<String, FlagCounts>, frame: &[u8]) {
    if let Some((src, flags)) = data_flags(frame) {
        let c = counts.entry(src.to_string()).or_default();
        c.data += 1;
        c.sird += u64::from(flags & DATA_FLAG_SIRD != 0);
        c.csn += u64::from(flags & DATA_FLAG_CSN != 0);
    }
}

/// Counts the frames `args.dev` sends (not those it receives) for
/// `args.seconds` after `args.delay`, and writes the counts.
pub fn run(args: &SniffArgs) -> Result<BTreeMap<String, FlagCounts>> {
    let name = std::ffi::CString::new(args.dev.as_str())?;
    // SAFETY: plain libc calls on a socket this function owns; every
    // pointer passed points to a live, correctly sized local.
    unsafe {
        let index = libc::if_nametoindex(name.as_ptr());
        if index == 0 {
            bail!("no interface {}", args.dev);
        }
        let proto = (libc::ETH_P_ALL as u16).to_be();
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto));
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("packet socket");
        }
        let close = Closer(fd);
        let mut sll: libc::sockaddr_ll = std::mem::zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = index as i32;
        let len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        if libc::bind(fd, &sll as *const _ as *const libc::sockaddr, len) != 0 {
            return Err(std::io::Error::last_os_error()).context("bind the packet socket");
        }
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 100_000,
        };
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
        std::thread::sleep(Duration::from_secs_f64(args.delay.max(0.0)));
        let end = Instant::now() + Duration::from_secs_f64(args.seconds.max(0.0));
        let mut counts = BTreeMap::new();
        let mut buf = [0u8; 256];
        while Instant::now() < end {
            let mut from: libc::sockaddr_ll = std::mem::zeroed();
            let mut flen = len;
            let n = libc::recvfrom(
                fd,
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                0,
                &mut from as *mut _ as *mut libc::sockaddr,
                &mut flen,
            );
            if n < 0 {
                let e = std::io::Error::last_os_error();
                match e.kind() {
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => continue,
                    _ => return Err(e).context("reading the packet socket"),
                }
            }
            if from.sll_pkttype == libc::PACKET_OUTGOING {
                count(&mut counts, &buf[..(n as usize).min(buf.len())]);
            }
        }
        drop(close);
        std::fs::write(&args.out, serde_json::to_string(&counts)?)
            .with_context(|| format!("cannot write {}", args.out.display()))?;
        Ok(counts)
    }
}

struct Closer(i32);

impl Drop for Closer {
    fn drop(&mut self) {
        // SAFETY: closes the descriptor this guard owns, once.
        unsafe {
            libc::close(self.0);
        }
    }
}

/// Reads counts a sniffer wrote.
pub fn read(path: &std::path::Path) -> Result<BTreeMap<String, FlagCounts>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| anyhow!("bad {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use homa_wire::{CommonHeader, DataHeader};

    fn frame(src: [u8; 4], flags: u8, proto: u8) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend([0x08, 0x00]);
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0];
        ip.extend(src);
        ip.extend([10, 111, 0, 2]);
        f.extend(ip);
        f.extend([0u8; 8]); // UDP
        let mut homa = Vec::new();
        Packet::emit_data_header(
            &CommonHeader {
                sport: 4000,
                dport: 4000,
                sender_id: 2,
            },
            &DataHeader {
                message_length: 100_000,
                flags,
                ..Default::default()
            },
            &mut homa,
        );
        f.extend(homa);
        f
    }

    #[test]
    fn counts_data_packets_and_their_flags_by_source() {
        let mut c = BTreeMap::new();
        count(
            &mut c,
            &frame([10, 111, 0, 1], DATA_FLAG_SIRD | DATA_FLAG_CSN, 17),
        );
        count(&mut c, &frame([10, 111, 0, 1], DATA_FLAG_SIRD, 17));
        count(&mut c, &frame([10, 111, 0, 6], DATA_FLAG_SIRD, 17));
        // Not UDP, not IPv4, truncated: ignored.
        count(&mut c, &frame([10, 111, 0, 6], DATA_FLAG_CSN, 6));
        let mut arp = frame([10, 111, 0, 6], 0, 17);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        count(&mut c, &arp);
        count(&mut c, &frame([10, 111, 0, 6], 0, 17)[..40]);
        assert_eq!(
            c["10.111.0.1"],
            FlagCounts {
                data: 2,
                sird: 2,
                csn: 1
            }
        );
        assert_eq!(
            c["10.111.0.6"],
            FlagCounts {
                data: 1,
                sird: 1,
                csn: 0
            }
        );
        assert_eq!(c.len(), 2);
    }
}
