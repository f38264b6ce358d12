//! Control messages (`cmsg`) of the socket calls: what goes with a send
//! (the TOS or traffic class byte, the GSO segment size) and what comes
//! with a receive (the TOS or traffic class byte, the GRO segment size).
//!
//! ECN lives in the two low bits of the TOS (IPv4) or traffic class (IPv6)
//! byte (RFC 3168): `0b10` is ECT(0), what a SIRD sender sets; `0b11` is CE,
//! what a congested switch (or an nftables rule) turns it into.

use std::mem::size_of;

/// The ECN field's bits within the TOS / traffic class byte.
pub(crate) const ECN_MASK: u8 = 0b11;
/// ECN-capable transport, codepoint 0.
pub(crate) const ECN_ECT0: u8 = 0b10;
/// Congestion experienced.
pub(crate) const ECN_CE: u8 = 0b11;

// Not (yet) in every libc release.
pub(crate) const UDP_SEGMENT: libc::c_int = 103;
pub(crate) const UDP_GRO: libc::c_int = 104;

/// Control-message space, 8-byte aligned as `cmsghdr` requires; room for
/// an int and a u16 option on send, a TOS and a GRO size on receive.
pub(crate) type CmsgBuf = [u64; 8];

/// True if a TOS / traffic class byte says "congestion experienced".
pub(crate) fn is_ce(tos: u8) -> bool {
    tos & ECN_MASK == ECN_CE
}

/// What the kernel told us about one received datagram.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RecvInfo {
    /// The TOS (IPv4) or traffic class (IPv6) byte, when the socket asked
    /// for it (`IP_RECVTOS`, `IPV6_RECVTCLASS`).
    pub(crate) tos: Option<u8>,
    /// The GRO segment size, when the datagram is a GRO batch.
    pub(crate) gro_segment: Option<usize>,
}

/// Reads the control messages the kernel left in `hdr` after a receive.
pub(crate) fn parse_recv(hdr: &libc::msghdr) -> RecvInfo {
    let mut info = RecvInfo::default();
    if hdr.msg_control.is_null() || hdr.msg_controllen < size_of::<libc::cmsghdr>() as _ {
        return info;
    }
    // SAFETY: the kernel filled msg_control/msg_controllen (which we set to
    // a live, aligned buffer); CMSG_FIRSTHDR/CMSG_NXTHDR never step past
    // msg_controllen, and each payload is read unaligned within the
    // message's cmsg_len.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        while !c.is_null() {
            let level = (*c).cmsg_level;
            let ty = (*c).cmsg_type;
            let data = libc::CMSG_DATA(c);
            let len = ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
            match (level, ty) {
                (libc::SOL_UDP, UDP_GRO) if len >= size_of::<libc::c_int>() => {
                    let v = std::ptr::read_unaligned(data as *const libc::c_int);
                    info.gro_segment = Some(v.max(0) as usize);
                }
                // IPv4 hands the TOS over as one byte (IP_RECVTOS), but take
                // an int too in case a kernel ever does.
                (libc::IPPROTO_IP, libc::IP_TOS) if len >= 1 => {
                    info.tos = Some(if len >= size_of::<libc::c_int>() {
                        std::ptr::read_unaligned(data as *const libc::c_int) as u8
                    } else {
                        *data
                    });
                }
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) if len >= size_of::<libc::c_int>() => {
                    let v = std::ptr::read_unaligned(data as *const libc::c_int);
                    info.tos = Some(v as u8);
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
    info
}

/// Points `hdr` at `buf` and writes the TOS (IPv4, `v6` false) or traffic
/// class (IPv6) and, for GSO, the segment size into it. Returns the bytes
/// used (what `msg_controllen` must be set to).
pub(crate) fn fill_send(
    hdr: &mut libc::msghdr,
    buf: &mut CmsgBuf,
    v6: bool,
    tos: u8,
    gso: Option<u16>,
) -> usize {
    let (level, name) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
    } else {
        (libc::IPPROTO_IP, libc::IP_TOS)
    };
    *buf = [0u64; 8];
    hdr.msg_control = buf.as_mut_ptr() as *mut libc::c_void;
    hdr.msg_controllen = size_of::<CmsgBuf>() as _;
    let mut used = 0;
    // SAFETY: msg_control points at `buf` (64 bytes, 8-byte aligned), which
    // holds both messages: CMSG_SPACE(4) + CMSG_SPACE(2) = 32 bytes. The
    // CMSG_* macros only walk within msg_controllen, and both headers they
    // return are non-null because the buffer is large enough.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(hdr);
        (*c).cmsg_level = level;
        (*c).cmsg_type = name;
        (*c).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut libc::c_int, tos as libc::c_int);
        used += libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as usize;
        if let Some(seg) = gso {
            let c2 = libc::CMSG_NXTHDR(hdr, c);
            (*c2).cmsg_level = libc::SOL_UDP;
            (*c2).cmsg_type = UDP_SEGMENT;
            (*c2).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(c2) as *mut u16, seg);
            used += libc::CMSG_SPACE(size_of::<u16>() as u32) as usize;
        }
    }
    used
}

/// `SO_EE_ORIGIN_ICMP`: a queued error that an ICMP message reported.
const SO_EE_ORIGIN_ICMP: u8 = 2;
/// ICMP type "destination unreachable".
const ICMP_DEST_UNREACH: u8 = 3;

/// True if the error a `MSG_ERRQUEUE` receive returned in `hdr` is an ICMP
/// destination-unreachable for the network, host, protocol or port (codes
/// 0-3), the errors Linux Homa's `homa_err_handler_v4` acts on.
pub(crate) fn icmp_dest_unreachable(hdr: &libc::msghdr) -> bool {
    if hdr.msg_control.is_null() || hdr.msg_controllen < size_of::<libc::cmsghdr>() as _ {
        return false;
    }
    // SAFETY: as in `parse_recv`: the kernel filled the control buffer we
    // passed; the walk stays within msg_controllen and reads the payload
    // (a `sock_extended_err`: errno u32, origin u8, type u8, code u8) only
    // when cmsg_len says it is there.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(hdr);
        while !c.is_null() {
            let len = ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
            if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_RECVERR && len >= 8
            {
                let d = libc::CMSG_DATA(c);
                let (origin, ty, code) = (*d.add(4), *d.add(5), *d.add(6));
                return origin == SO_EE_ORIGIN_ICMP && ty == ICMP_DEST_UNREACH && code <= 3;
            }
            c = libc::CMSG_NXTHDR(hdr, c);
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::zeroed;

    /// What `fill_send` writes, `parse_recv` reads back (the kernel's
    /// receive format for IPv6; IPv4's one-byte TOS is covered by the
    /// integration tests over real sockets).
    #[test]
    fn send_cmsgs_parse_back() {
        for (v6, tos, gso) in [
            (false, 0xa2u8, Some(1_400u16)),
            (true, 0x03, None),
            (true, 0xe2, Some(9_000)),
        ] {
            // SAFETY: all-zero is a valid msghdr.
            let mut hdr: libc::msghdr = unsafe { zeroed() };
            let mut buf: CmsgBuf = [0; 8];
            let used = fill_send(&mut hdr, &mut buf, v6, tos, gso);
            hdr.msg_controllen = used as _;
            let info = parse_recv(&hdr);
            assert_eq!(info.tos, Some(tos));
            // UDP_SEGMENT is not UDP_GRO: a send's segment size is not read
            // back as a GRO size.
            assert_eq!(info.gro_segment, None);
        }
    }

    #[test]
    fn ce_is_both_ecn_bits() {
        assert!(is_ce(0x03));
        assert!(is_ce(0xe3));
        assert!(!is_ce(0x02));
        assert!(!is_ce(0x01));
        assert!(!is_ce(0xe0));
    }

    #[test]
    fn empty_control_parses_to_nothing() {
        // SAFETY: all-zero is a valid msghdr.
        let hdr: libc::msghdr = unsafe { zeroed() };
        assert_eq!(parse_recv(&hdr), RecvInfo::default());
    }
}
