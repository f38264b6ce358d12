//! The structures C sees, `#[repr(C)]`, laid out as `include/homars.h`
//! declares them (a test compiles a C program that prints the header's
//! sizes and offsets and compares them with these).

use crate::error::CError;
use bytes::Bytes;
use homa::{Endpoint, RpcId};
use std::ffi::{c_char, c_int, CStr};
use std::net::SocketAddr;

/// Bytes of `homars_rpc.peer`, with its terminating NUL: the longest
/// address text ("[v6%scope]:port") is 64 characters.
pub const HOMARS_ADDRSTRLEN: usize = 72;

/// `homars_endpoint`: opaque to C.
#[derive(Debug)]
pub struct HomarsEndpoint {
    pub(crate) ep: Endpoint,
}

/// `homars_rpc`: names one RPC: Homa's id (even when this endpoint is the
/// client) and the peer, as text.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct HomarsRpc {
    /// The RPC's id.
    pub id: u64,
    /// The other end, "ip:port" or "\[ipv6\]:port", NUL-terminated.
    pub peer: [c_char; HOMARS_ADDRSTRLEN],
}

impl HomarsRpc {
    /// The C form of `id`.
    pub fn from_id(id: RpcId) -> Result<HomarsRpc, CError> {
        let mut peer = [0 as c_char; HOMARS_ADDRSTRLEN];
        let text = id.peer.to_string();
        if text.len() >= HOMARS_ADDRSTRLEN {
            return Err(CError::Invalid(format!(
                "address {text} longer than HOMARS_ADDRSTRLEN"
            )));
        }
        for (dst, b) in peer.iter_mut().zip(text.bytes()) {
            *dst = b as c_char;
        }
        Ok(HomarsRpc { id: id.id, peer })
    }

    /// The runtime's form: the peer must be a NUL-terminated address.
    pub fn to_id(&self) -> Result<RpcId, CError> {
        let bytes: Vec<u8> = self.peer.iter().map(|&c| c as u8).collect();
        let text = CStr::from_bytes_until_nul(&bytes)
            .map_err(|_| CError::Invalid("homars_rpc.peer is not NUL-terminated".into()))?
            .to_str()
            .map_err(|_| CError::Invalid("homars_rpc.peer is not UTF-8".into()))?;
        Ok(RpcId {
            id: self.id,
            peer: parse_addr(text)?,
        })
    }
}

/// Parses "ip:port" / "\[ipv6\]:port" (numeric only: no name lookup).
pub fn parse_addr(text: &str) -> Result<SocketAddr, CError> {
    text.parse().map_err(|_| {
        CError::Homa(homa::Error::BadAddress(format!(
            "{text:?} is not \"ip:port\" or \"[ipv6]:port\""
        )))
    })
}

/// `homars_msg`: a received message (or, from `homars_recv_any_response`,
/// the failure of an RPC).
#[repr(C)]
#[derive(Debug)]
pub struct HomarsMsg {
    /// Which RPC this belongs to.
    pub rpc: HomarsRpc,
    /// 0, or the negative errno of the RPC's failure (`data` then holds
    /// nothing).
    pub status: c_int,
    /// The message's bytes; never NULL, valid until `homars_msg_free`.
    pub data: *const u8,
    /// Their number.
    pub len: usize,
}

/// What `homars_msg_free` frees: the message and the bytes `data` points
/// into (received bytes are handed over without a copy). `msg` comes first
/// so that a pointer to the box is a pointer to it.
#[repr(C)]
struct MsgBox {
    msg: HomarsMsg,
    bytes: Bytes,
}

/// What `data` points to for an empty message (never NULL, so C may pass
/// it to `memcpy`).
static EMPTY: [u8; 1] = [0];

impl HomarsMsg {
    /// A heap message for C owning `bytes`; freed by [`HomarsMsg::free`].
    pub fn boxed(rpc: HomarsRpc, status: c_int, bytes: Bytes) -> *mut HomarsMsg {
        let (data, len) = if bytes.is_empty() {
            (EMPTY.as_ptr(), 0)
        } else {
            (bytes.as_ptr(), bytes.len())
        };
        let b = Box::new(MsgBox {
            msg: HomarsMsg {
                rpc,
                status,
                data,
                len,
            },
            bytes,
        });
        Box::into_raw(b).cast::<HomarsMsg>()
    }

    /// Frees a message made by [`HomarsMsg::boxed`].
    ///
    /// # Safety
    /// `msg` comes from [`HomarsMsg::boxed`] and has not been freed.
    pub unsafe fn free(msg: *mut HomarsMsg) {
        // SAFETY: by the contract, `msg` is the first field (offset 0, the
        // struct is repr(C)) of a live `Box<MsgBox>`, so it is that box's
        // pointer.
        drop(unsafe { Box::from_raw(msg.cast::<MsgBox>()) });
    }
}

/// `homars_metrics`: a few counters, for programs; `homars_metrics_json`
/// has them all.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HomarsMetrics {
    /// Requests this endpoint sent as a client.
    pub requests_started: u64,
    /// Requests delivered to this server.
    pub requests_delivered: u64,
    /// Responses delivered to this client.
    pub responses_delivered: u64,
    /// Client RPCs that failed (any reason).
    pub rpcs_failed: u64,
    /// RPCs aborted by the application (including calls that timed out).
    pub rpcs_aborted: u64,
    /// RPCs given up because their peer stopped answering.
    pub peers_dead: u64,
    /// Timer rounds that asked a silent peer for data or probed it.
    pub timeouts: u64,
    /// RESENDs sent after a timeout.
    pub resends_requested: u64,
    /// Client RPCs restarted because the server did not know them.
    pub restarts: u64,
    /// RPCs alive now (client and server).
    pub active_rpcs: u64,
    /// Client RPCs alive now.
    pub active_client_rpcs: u64,
    /// Message bytes sent in DATA packets (retransmissions included).
    pub data_bytes_sent: u64,
    /// Message bytes sent again (RESEND or restart).
    pub data_bytes_retransmitted: u64,
    /// Packets handed to the kernel.
    pub packets_sent: u64,
    /// Packets received.
    pub packets_received: u64,
    /// Packets the kernel refused to send (Homa recovers them).
    pub send_drops: u64,
}

impl HomarsMetrics {
    /// The counters of `ep` now.
    pub fn of(ep: &Endpoint) -> HomarsMetrics {
        let m = ep.metrics();
        let r = ep.runtime_stats();
        HomarsMetrics {
            requests_started: m.requests_started,
            requests_delivered: m.requests_delivered,
            responses_delivered: m.responses_delivered,
            rpcs_failed: m.rpcs_failed,
            rpcs_aborted: m.rpcs_aborted,
            peers_dead: m.peers_dead,
            timeouts: m.timeouts,
            resends_requested: m.resends_requested,
            restarts: m.restarts,
            active_rpcs: m.active_rpcs,
            active_client_rpcs: m.active_client_rpcs,
            data_bytes_sent: m.data_bytes_sent,
            data_bytes_retransmitted: m.data_bytes_retransmitted,
            packets_sent: r.packets_sent,
            packets_received: r.packets_received,
            send_drops: r.send_drops,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpc_ids_round_trip_through_text() {
        for peer in [
            "127.0.0.1:80",
            "[::1]:65535",
            "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff%4294967295]:65535",
        ] {
            let id = RpcId {
                id: u64::MAX - 1,
                peer: peer.parse().unwrap(),
            };
            let c = HomarsRpc::from_id(id).unwrap();
            assert_eq!(c.to_id().unwrap(), id, "{peer}");
        }
    }

    #[test]
    fn malformed_peers_are_refused() {
        let mut c = HomarsRpc::from_id(RpcId {
            id: 2,
            peer: "127.0.0.1:80".parse().unwrap(),
        })
        .unwrap();
        c.peer = [b'1' as c_char; HOMARS_ADDRSTRLEN];
        assert!(matches!(c.to_id(), Err(CError::Invalid(_))));
        c.peer = [0; HOMARS_ADDRSTRLEN];
        assert_eq!(c.to_id().unwrap_err().errno(), libc::EINVAL);
        assert!(matches!(
            parse_addr("localhost:80"),
            Err(CError::Homa(homa::Error::BadAddress(_)))
        ));
    }

    #[test]
    fn messages_own_their_bytes() {
        let rpc = HomarsRpc::from_id(RpcId {
            id: 2,
            peer: "127.0.0.1:80".parse().unwrap(),
        })
        .unwrap();
        let m = HomarsMsg::boxed(rpc, 0, Bytes::from(vec![7u8; 3]));
        // SAFETY: `m` was just made by `boxed` and is freed once below.
        unsafe {
            assert_eq!(std::slice::from_raw_parts((*m).data, (*m).len), &[7, 7, 7]);
            HomarsMsg::free(m);
        }
        let m = HomarsMsg::boxed(rpc, -libc::EHOSTUNREACH, Bytes::new());
        // SAFETY: as above.
        unsafe {
            assert!(!(*m).data.is_null());
            assert_eq!(((*m).len, (*m).status), (0, -libc::EHOSTUNREACH));
            HomarsMsg::free(m);
        }
    }
}
