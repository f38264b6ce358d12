//! A client run: connect, warm up, measure, report.

use crate::error::{check_loopback, PerfError};
use crate::homa_rpc::{self, HomaClient, Pipeline};
use crate::proto::{Protocol, MAX_TCP_MESSAGE, MAX_UDP_MESSAGE};
use crate::stats::{Recorder, Report, RunLabel};
use crate::tcp::TcpClient;
use crate::tcp_pipeline::TcpPipeline;
use crate::udp::UdpClient;
use crate::worker::{run_closed_loop, LoopParams, LoopResult, RpcClient, StopRule};
use crate::workload::SizeSpec;
use std::net::SocketAddr;
use std::time::Duration;

/// Everything a client run needs.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Transport.
    pub protocol: Protocol,
    /// The server (a loopback address).
    pub server: SocketAddr,
    /// Request sizes.
    pub sizes: SizeSpec,
    /// When the measured interval ends.
    pub stop: StopRule,
    /// RPCs outstanding at once (connections for TCP, sockets for UDP,
    /// threads or pipeline depth for Homa).
    pub concurrency: usize,
    /// Response size asked of the server (bytes).
    pub response_size: usize,
    /// Spin on the sockets instead of sleeping.
    pub busy_poll: bool,
    /// RPCs before the measured interval, excluded from the statistics.
    pub warmup: u64,
    /// Give up on an RPC after this long (counted as an error).
    pub timeout: Duration,
    /// Homa runtime configuration for the client endpoint (its `busy_poll`
    /// is switched on when `busy_poll` above is set).
    pub homa_config: homa::Config,
    /// One thread keeps `concurrency` RPCs outstanding instead of
    /// `concurrency` threads each doing one at a time: Homa with
    /// `send_request`/`recv_any_response` on one endpoint, TCP with
    /// `concurrency` nonblocking connections under one `epoll`. Not for UDP.
    pub pipelined: bool,
    /// Homa only: each of the `concurrency` client threads binds its own
    /// endpoint (as separate client processes would), instead of all
    /// sharing one. The report's Homa metrics are then those of the first.
    pub homa_endpoint_per_client: bool,
    /// Homa only: whether the client endpoints are connected to the server
    /// ([`homa::Config::peer`]), as the UDP and TCP clients' sockets are
    /// (where the configuration allows it: UDP, one socket, no peer of its
    /// own). `None` (the default): when busy-polling, where it saves the
    /// kernel's route lookup on every send and costs nothing; a connected
    /// endpoint's readers sleep in `ppoll` rather than in the receive
    /// call, which made a sleeping 100 B round trip slower
    /// (docs/runtime-profile.md, twelfth pass).
    pub homa_connect: Option<bool>,
    /// Seed of the request-size sampling (worker i uses seed + i).
    pub seed: u64,
}

impl ClientOptions {
    /// Defaults for a run against `server`: 100 B requests and responses,
    /// one outstanding, 1,000 RPCs after 100 of warm-up, 5 s timeout,
    /// `homa::Config::loopback()`.
    pub fn new(protocol: Protocol, server: SocketAddr) -> ClientOptions {
        ClientOptions {
            protocol,
            server,
            sizes: SizeSpec::Fixed(100),
            stop: StopRule::Count(1_000),
            concurrency: 1,
            response_size: 100,
            busy_poll: false,
            warmup: 100,
            timeout: Duration::from_secs(5),
            homa_config: homa::Config::loopback(),
            pipelined: false,
            homa_endpoint_per_client: false,
            homa_connect: None,
            seed: 1,
        }
    }

    /// Largest request and response the protocol can carry.
    fn limit(&self) -> usize {
        match self.protocol {
            Protocol::Udp => MAX_UDP_MESSAGE,
            Protocol::Tcp => MAX_TCP_MESSAGE,
            Protocol::Homa => self.homa_config.core.max_message_size as usize,
        }
    }

    /// Refuses combinations that cannot run.
    pub fn validate(&self) -> Result<(), PerfError> {
        check_loopback(self.server)?;
        if self.concurrency == 0 {
            return Err(PerfError::Usage("--concurrency must be at least 1".into()));
        }
        if self.pipelined && self.protocol == Protocol::Udp {
            return Err(PerfError::Usage(
                "--pipelined is for Homa and TCP (the UDP client has no loss recovery to keep several datagrams in flight with)"
                    .into(),
            ));
        }
        if self.homa_endpoint_per_client && self.protocol != Protocol::Homa {
            return Err(PerfError::Usage(
                "--endpoint-per-client is for Homa only (TCP and UDP clients each have their own socket)"
                    .into(),
            ));
        }
        let limit = self.limit();
        if self.sizes.max() > limit {
            return Err(PerfError::Usage(format!(
                "requests of up to {} B do not fit {}'s limit of {limit} B{}",
                self.sizes.max(),
                self.protocol,
                if matches!(self.sizes, SizeSpec::Workload { .. }) {
                    " (lower --max-size)"
                } else {
                    ""
                }
            )));
        }
        if self.response_size > limit {
            return Err(PerfError::Usage(format!(
                "--response-size {} exceeds {}'s limit of {limit} B",
                self.response_size, self.protocol
            )));
        }
        if let StopRule::Duration(d) = self.stop {
            if d.is_zero() {
                return Err(PerfError::Usage("--seconds must be positive".into()));
            }
        }
        Ok(())
    }

    /// How a report of this run is labelled.
    pub fn label(&self) -> RunLabel {
        RunLabel {
            protocol: self.protocol.name().to_string(),
            busy_poll: self.busy_poll,
            concurrency: self.concurrency,
            size: match self.sizes {
                SizeSpec::Fixed(n) => Some(n),
                SizeSpec::Workload { .. } => None,
            },
            workload: self.sizes.workload_name().map(str::to_string),
            response_size: self.response_size,
        }
    }
}

/// The raw outcome of a client run, before it is summarised: recorders of
/// several runs can be merged (the demo interleaves short runs).
#[derive(Debug, Clone)]
pub struct Measured {
    /// Latencies and counts of the measured interval.
    pub recorder: Recorder,
    /// Length of the measured interval.
    pub elapsed: Duration,
    /// The Homa client endpoint's counters at the end (Homa only), with
    /// the runtime's under `"runtime"`.
    pub homa_metrics: Option<serde_json::Value>,
}

/// Runs the client and returns its report. Fails if the setup fails or no
/// RPC at all succeeds; individual failed RPCs are counted in `errors`.
pub fn run_client(opts: &ClientOptions) -> Result<Report, PerfError> {
    let m = measure(opts)?;
    let mut report = Report::new(opts.label(), &m.recorder, m.elapsed);
    report.homa_metrics = m.homa_metrics;
    Ok(report)
}

/// Runs the client and returns what it measured, unsummarised.
pub fn measure(opts: &ClientOptions) -> Result<Measured, PerfError> {
    opts.validate()?;
    let params = LoopParams {
        sizes: &opts.sizes,
        stop: opts.stop,
        warmup: opts.warmup,
        seed: opts.seed,
    };
    let mut homa_metrics = None;
    let result = match opts.protocol {
        Protocol::Tcp if opts.pipelined => TcpPipeline::connect(
            opts.server,
            opts.concurrency,
            opts.busy_poll,
            opts.timeout,
            opts.response_size,
        )?
        .run(&params)?,
        Protocol::Tcp => {
            let clients = (0..opts.concurrency)
                .map(|_| {
                    TcpClient::connect(
                        opts.server,
                        opts.busy_poll,
                        opts.timeout,
                        opts.response_size,
                    )
                    .map(|c| Box::new(c) as Box<dyn RpcClient>)
                })
                .collect::<Result<Vec<_>, _>>()?;
            run_closed_loop(clients, &params)?
        }
        Protocol::Udp => {
            let clients = (0..opts.concurrency)
                .map(|_| {
                    UdpClient::connect(
                        opts.server,
                        opts.busy_poll,
                        opts.timeout,
                        opts.response_size,
                    )
                    .map(|c| Box::new(c) as Box<dyn RpcClient>)
                })
                .collect::<Result<Vec<_>, _>>()?;
            run_closed_loop(clients, &params)?
        }
        Protocol::Homa => {
            let mut config = opts.homa_config.clone();
            config.busy_poll |= opts.busy_poll;
            if opts.homa_connect.unwrap_or(config.busy_poll) && config.peer.is_none() {
                // (Where the runtime allows a peer: its own check says.)
                let mut connected = config.clone();
                connected.peer = Some(opts.server);
                if connected.check().is_ok() {
                    config = connected;
                }
            }
            let endpoint = homa_rpc::bind(homa_rpc::client_bind_addr(opts.server), config)?;
            let result = run_homa(opts, &endpoint, &params);
            homa_metrics = serde_json::to_value(endpoint.metrics()).ok().map(|mut m| {
                // The runtime's own counters (wake-ups, kicks, system
                // calls) beside the protocol's, under "runtime".
                if let (Some(o), Ok(r)) = (
                    m.as_object_mut(),
                    serde_json::to_value(endpoint.runtime_stats()),
                ) {
                    o.insert("runtime".into(), r);
                }
                m
            });
            endpoint.shutdown();
            result?
        }
    };
    finish(result, homa_metrics)
}

fn run_homa(
    opts: &ClientOptions,
    endpoint: &homa::Endpoint,
    params: &LoopParams,
) -> Result<LoopResult, PerfError> {
    if opts.pipelined {
        Pipeline {
            endpoint,
            server: opts.server,
            response_size: opts.response_size,
            concurrency: opts.concurrency,
            timeout: opts.timeout,
        }
        .run(params)
    } else {
        let clients = (0..opts.concurrency)
            .map(|i| {
                let ep = if opts.homa_endpoint_per_client && i > 0 {
                    homa_rpc::bind(
                        homa_rpc::client_bind_addr(opts.server),
                        endpoint.config().clone(),
                    )?
                } else {
                    endpoint.clone()
                };
                Ok(Box::new(HomaClient::new(
                    ep,
                    opts.server,
                    opts.timeout,
                    opts.response_size,
                )) as Box<dyn RpcClient>)
            })
            .collect::<Result<Vec<_>, PerfError>>()?;
        run_closed_loop(clients, params)
    }
}

fn finish(
    result: LoopResult,
    homa_metrics: Option<serde_json::Value>,
) -> Result<Measured, PerfError> {
    if let Some(fatal) = result.fatal {
        if result.recorder.rpcs == 0 {
            return Err(fatal);
        }
        tracing::warn!("the run ended early: {fatal}");
    }
    Ok(Measured {
        recorder: result.recorder,
        elapsed: result.elapsed,
        homa_metrics,
    })
}
