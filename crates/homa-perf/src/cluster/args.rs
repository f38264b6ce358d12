//! The flags of `homa-perf cluster`: [`ClusterArgs`] and the
//! [`ResponseSize`] a request asks for.

use crate::proto::{expected_response_size, Protocol};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

/// The response size a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseSize {
    /// As large as the request (the Homa/Linux paper's cluster benchmark).
    Same,
    /// This many bytes, whatever the request's size.
    Bytes(u64),
}

impl ResponseSize {
    /// The response size asked for by a request of `request` bytes.
    pub fn for_request(self, request: u64) -> u64 {
        match self {
            ResponseSize::Same => request,
            ResponseSize::Bytes(n) => n,
        }
    }

    /// The response length a correct server returns to a request of
    /// `request` bytes: requests under 4 bytes cannot carry the wanted size
    /// over Homa and get the default; TCP asks for the same so that both
    /// protocols move the same bytes.
    pub fn expected(self, request: u64) -> u64 {
        let want = usize::try_from(self.for_request(request)).unwrap_or(usize::MAX);
        let request = usize::try_from(request).unwrap_or(usize::MAX);
        expected_response_size(request, want) as u64
    }
}

impl FromStr for ResponseSize {
    type Err = String;

    fn from_str(s: &str) -> Result<ResponseSize, String> {
        if s.eq_ignore_ascii_case("same") {
            return Ok(ResponseSize::Same);
        }
        s.parse::<u64>()
            .map(ResponseSize::Bytes)
            .map_err(|_| format!("expected `same` or a number of bytes, got {s:?}"))
    }
}

impl std::fmt::Display for ResponseSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResponseSize::Same => f.write_str("same"),
            ResponseSize::Bytes(n) => write!(f, "{n}"),
        }
    }
}

/// The flags of `homa-perf cluster`: one host of a cluster benchmark.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct ClusterArgs {
    /// This node's server address; the client uses the same IP with an
    /// automatic port.
    #[arg(long, value_name = "ADDR:PORT")]
    pub me: SocketAddr,
    /// The servers of the cluster (comma-separated); an entry equal to
    /// --me is skipped.
    #[arg(
        long,
        value_name = "ADDR:PORT,...",
        value_delimiter = ',',
        required = true
    )]
    pub peers: Vec<SocketAddr>,
    /// Transport: homa or tcp.
    #[arg(long, value_enum, default_value_t = Protocol::Homa)]
    pub protocol: Protocol,
    /// Draw request sizes from a workload: w1..w5, thesis-w3, thesis-w5, fixed:N or a
    /// `size_bytes,cdf` CSV file.
    #[arg(long, conflicts_with = "size")]
    pub workload: Option<String>,
    /// Send every request with this many bytes instead of a workload.
    #[arg(long, value_name = "BYTES")]
    pub size: Option<u64>,
    /// Workload sizes above this are sent at this size.
    #[arg(long, value_name = "BYTES", default_value_t = 1_000_000)]
    pub max_size: u64,
    /// Response size: `same` as the request, or a number of bytes.
    #[arg(long, value_name = "same|BYTES", default_value_t = ResponseSize::Same)]
    pub response_size: ResponseSize,
    /// Payload Gbit/s this host sends (its requests plus its server's
    /// responses); sets the Poisson arrival rate.
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    pub gbps: f64,
    /// Length of the measured window (s).
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    pub seconds: f64,
    /// Load offered before the window and not recorded (s).
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    pub warmup: f64,
    /// Most RPCs this client has outstanding; arrivals beyond are skipped.
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub client_max: usize,
    /// TCP connections from this client to each peer.
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub tcp_connections: usize,
    /// Homa server threads receiving requests.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub server_threads: usize,
    /// Homa runtime configuration (TOML); default: `homa::Config::default()`.
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Measure unloaded round trips (one RPC at a time) instead of
    /// offering Poisson load.
    #[arg(long, conflicts_with = "server_only")]
    pub unloaded: bool,
    /// Unloaded mode: workload quantiles probed (plus its extremes).
    #[arg(long, value_name = "N", default_value_t = 40)]
    pub unloaded_points: usize,
    /// Unloaded mode: RPCs per probed size.
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub unloaded_count: u64,
    /// Only serve, for --warmup + --seconds + --linger seconds.
    #[arg(long)]
    pub server_only: bool,
    /// Keep serving this long after the client is done (s).
    #[arg(long, value_name = "S", default_value_t = 3.0)]
    pub linger: f64,
    /// After the window, wait this long for outstanding RPCs (s).
    #[arg(long, value_name = "S", default_value_t = 2.0)]
    pub drain: f64,
    /// Wait this long for every peer's server to answer (s).
    #[arg(long, value_name = "S", default_value_t = 15.0)]
    pub ready_timeout: f64,
    /// An RPC not answered within this many milliseconds is an error.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// Seed of arrivals, peers and sizes (mixed with --me).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the JSON report to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

impl ClusterArgs {
    /// The command-line defaults, for a node at `me` among `peers`. Set
    /// `workload` or `size` before running it.
    pub fn new(me: SocketAddr, peers: Vec<SocketAddr>, protocol: Protocol) -> ClusterArgs {
        ClusterArgs {
            me,
            peers,
            protocol,
            workload: None,
            size: None,
            max_size: 1_000_000,
            response_size: ResponseSize::Same,
            gbps: 1.0,
            seconds: 10.0,
            warmup: 1.0,
            client_max: 500,
            tcp_connections: 1,
            server_threads: 1,
            config: None,
            unloaded: false,
            unloaded_points: 40,
            unloaded_count: 30,
            server_only: false,
            linger: 3.0,
            drain: 2.0,
            ready_timeout: 15.0,
            timeout_ms: 10_000,
            seed: 1,
            out: None,
        }
    }

    /// The flags as arguments of `homa-perf cluster`, every value explicit
    /// (`--flag=value`, so negative numbers parse too). Paths that are not
    /// UTF-8 are converted lossily.
    pub fn to_args(&self) -> Vec<String> {
        let mut a = vec![format!("--me={}", self.me)];
        if !self.peers.is_empty() {
            let peers: Vec<String> = self.peers.iter().map(|p| p.to_string()).collect();
            a.push(format!("--peers={}", peers.join(",")));
        }
        a.push(format!("--protocol={}", self.protocol.name()));
        if let Some(w) = &self.workload {
            a.push(format!("--workload={w}"));
        }
        if let Some(s) = self.size {
            a.push(format!("--size={s}"));
        }
        a.push(format!("--max-size={}", self.max_size));
        a.push(format!("--response-size={}", self.response_size));
        a.push(format!("--gbps={}", self.gbps));
        a.push(format!("--seconds={}", self.seconds));
        a.push(format!("--warmup={}", self.warmup));
        a.push(format!("--client-max={}", self.client_max));
        a.push(format!("--tcp-connections={}", self.tcp_connections));
        a.push(format!("--server-threads={}", self.server_threads));
        if let Some(c) = &self.config {
            a.push(format!("--config={}", c.to_string_lossy()));
        }
        if self.unloaded {
            a.push("--unloaded".to_string());
        }
        a.push(format!("--unloaded-points={}", self.unloaded_points));
        a.push(format!("--unloaded-count={}", self.unloaded_count));
        if self.server_only {
            a.push("--server-only".to_string());
        }
        a.push(format!("--linger={}", self.linger));
        a.push(format!("--drain={}", self.drain));
        a.push(format!("--ready-timeout={}", self.ready_timeout));
        a.push(format!("--timeout-ms={}", self.timeout_ms));
        a.push(format!("--seed={}", self.seed));
        if let Some(o) = &self.out {
            a.push(format!("--out={}", o.to_string_lossy()));
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_sizes_parse_and_print() {
        for text in ["same", "0", "12345"] {
            let r: ResponseSize = text.parse().unwrap();
            assert_eq!(r.to_string(), text);
        }
        assert!("big".parse::<ResponseSize>().is_err());
        assert_eq!(ResponseSize::Same.expected(3), 100);
        assert_eq!(ResponseSize::Same.expected(500), 500);
        assert_eq!(ResponseSize::Bytes(7).expected(500), 7);
    }
}
