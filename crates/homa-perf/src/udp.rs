//! UDP: one datagram each way, the floor any datagram transport pays.
//!
//! A request's first 4 bytes carry the wanted response size (little-endian;
//! shorter requests get [`DEFAULT_RESPONSE_SIZE`](crate::proto::DEFAULT_RESPONSE_SIZE)
//! bytes). Bytes 4..12, when the request has them, carry a sequence number
//! that the server copies into the response (when the response has room),
//! so a client can drop a late answer to an RPC it already gave up on.
//! Requests are patterned as Homa's, the sequence number being the tag (see
//! [`crate::proto::make_request`]); the server checks them and answers with
//! the pattern bytes the tag and length call for (bytes 4..12 aside), which
//! the client checks.
//! Nothing is retransmitted: a lost datagram is an error after the timeout.

use crate::error::PerfError;
use crate::homa_rpc::new_request;
use crate::proto::{
    do_work, expected_response, expected_response_size, is_wait, make_response, request_ok,
    wanted_response_size, Interrupt, MAX_UDP_MESSAGE, STOP_CHECK_INTERVAL,
};
use crate::worker::{RpcClient, RpcDone, RpcError};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Bytes of a datagram that carry the sequence number.
const SEQ: std::ops::Range<usize> = 4..12;

/// Sets a socket up for blocking (with a timeout) or spinning receives.
fn configure(socket: &UdpSocket, busy_poll: bool, timeout: Duration) -> io::Result<()> {
    socket.set_nonblocking(busy_poll)?;
    if !busy_poll {
        socket.set_read_timeout(Some(timeout))?;
    }
    Ok(())
}

/// Answers datagrams on `socket` until `stop` is set. Several threads may
/// serve clones of one socket.
pub(crate) fn serve(socket: UdpSocket, busy_poll: bool, work: Duration, stop: &AtomicBool) {
    if let Err(e) = configure(&socket, busy_poll, STOP_CHECK_INTERVAL) {
        tracing::error!("udp server: cannot configure the socket: {e}");
        return;
    }
    let mut request = vec![0u8; 65_536];
    let mut response = vec![0u8; MAX_UDP_MESSAGE];
    while !stop.load(Ordering::Relaxed) {
        let (n, from) = match socket.recv_from(&mut request) {
            Ok(r) => r,
            Err(e) if is_wait(&e) => {
                std::hint::spin_loop();
                continue;
            }
            Err(e) => {
                // E.g. ECONNREFUSED reported for an earlier reply to a
                // client that has gone: not the server's problem.
                tracing::debug!("udp server: receive failed: {e}");
                continue;
            }
        };
        let want = wanted_response_size(&request[..n]).min(MAX_UDP_MESSAGE);
        let ok = request_ok(&request[..n]);
        if !ok {
            tracing::warn!("udp server: a request of {n} B from {from} has wrong bytes");
        }
        // Wrong bytes are answered with wrong bytes, for the client to see.
        response[..want].copy_from_slice(&make_response(&request[..n], want, !ok));
        do_work(work);
        if n >= SEQ.end && want >= SEQ.end {
            response[SEQ].copy_from_slice(&request[SEQ]);
        }
        loop {
            match socket.send_to(&response[..want], from) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::hint::spin_loop(),
                Err(e) => {
                    tracing::debug!("udp server: send to {from} failed: {e}");
                    break;
                }
                Ok(_) => break,
            }
        }
    }
}

/// A client socket with at most one outstanding RPC.
pub(crate) struct UdpClient {
    socket: UdpSocket,
    timeout: Duration,
    response_size: usize,
    response: Vec<u8>,
}

impl UdpClient {
    /// Opens a socket connected to `server` (a loopback address).
    pub(crate) fn connect(
        server: SocketAddr,
        busy_poll: bool,
        timeout: Duration,
        response_size: usize,
    ) -> Result<UdpClient, PerfError> {
        let local: SocketAddr = if server.is_ipv4() {
            (std::net::Ipv4Addr::LOCALHOST, 0).into()
        } else {
            (std::net::Ipv6Addr::LOCALHOST, 0).into()
        };
        let socket = UdpSocket::bind(local).map_err(|e| PerfError::io("bind UDP socket", e))?;
        socket
            .connect(server)
            .map_err(|e| PerfError::io(format!("connect UDP socket to {server}"), e))?;
        configure(&socket, busy_poll, timeout)
            .map_err(|e| PerfError::io("configure UDP socket", e))?;
        Ok(UdpClient {
            socket,
            timeout,
            response_size,
            response: vec![0u8; 65_536],
        })
    }
}

impl RpcClient for UdpClient {
    fn rpc(&mut self, request_size: usize) -> Result<RpcDone, RpcError> {
        // The request's tag is its sequence number (bytes 4..12).
        let (seq, request) = new_request(self.response_size, request_size);
        let sent = Instant::now();
        let intr = Interrupt {
            stop: None,
            deadline: Some(sent + self.timeout),
        };
        let tagged = request_size >= SEQ.end
            && expected_response_size(request_size, self.response_size) >= SEQ.end;
        loop {
            match self.socket.send(&request) {
                Ok(_) => break,
                Err(e) if is_wait(&e) => {
                    intr.check().map_err(RpcError::from_io)?;
                    std::hint::spin_loop();
                }
                Err(e) => return Err(RpcError::from_io(e)),
            }
        }
        loop {
            match self.socket.recv(&mut self.response) {
                Ok(n) => {
                    if tagged && n >= SEQ.end && self.response[SEQ] != seq.to_le_bytes() {
                        // A late answer to an RPC that already timed out.
                        continue;
                    }
                    let latency = sent.elapsed();
                    let got = &self.response[..n];
                    let want = expected_response(seq, request_size, n);
                    let content_ok = if tagged && n >= SEQ.end {
                        got[..SEQ.start] == want[..SEQ.start] && got[SEQ.end..] == want[SEQ.end..]
                    } else {
                        got == &want[..]
                    };
                    return Ok(RpcDone {
                        len: n,
                        latency,
                        content_ok,
                    });
                }
                Err(e) if is_wait(&e) => {
                    intr.check().map_err(RpcError::from_io)?;
                    std::hint::spin_loop();
                }
                Err(e) => return Err(RpcError::from_io(e)),
            }
        }
    }

    fn expected_response(&self, request_size: usize) -> usize {
        expected_response_size(request_size, self.response_size).min(MAX_UDP_MESSAGE)
    }
}
