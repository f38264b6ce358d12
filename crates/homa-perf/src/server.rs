//! The echo-a-size servers of the three protocols, run in background threads.

use crate::error::{check_loopback, PerfError};
use crate::proto::Protocol;
use crate::{homa_rpc, tcp, udp};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What to serve and how.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Transport.
    pub protocol: Protocol,
    /// Loopback address to listen on; port 0 picks a free port.
    pub bind: SocketAddr,
    /// Threads that receive requests (Homa and UDP; TCP uses one thread per
    /// connection).
    pub threads: usize,
    /// Spin on the sockets instead of sleeping.
    pub busy_poll: bool,
    /// Homa runtime configuration (its `busy_poll` is overridden by the
    /// field above when that is set).
    pub homa_config: homa::Config,
    /// CPU time the server spends on each request before it answers (a
    /// busy loop, as an application's own work; zero for an echo server).
    /// Shows whether a transport lets several server threads work at once.
    pub work_per_request: Duration,
}

/// A running server; stops when [`Server::shutdown`] is called or it is dropped.
pub struct Server {
    addr: SocketAddr,
    protocol: Protocol,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    endpoint: Option<homa::Endpoint>,
    bad_requests: Arc<AtomicU64>,
}

impl Server {
    /// Binds and starts the server threads.
    pub fn start(opts: &ServerOptions) -> Result<Server, PerfError> {
        check_loopback(opts.bind)?;
        Server::start_unchecked(opts)
    }

    /// [`Server::start`] without the loopback check, for cluster mode, which
    /// checks its addresses itself.
    pub(crate) fn start_unchecked(opts: &ServerOptions) -> Result<Server, PerfError> {
        let threads = opts.threads.max(1);
        let stop = Arc::new(AtomicBool::new(false));
        let mut server = Server {
            addr: opts.bind,
            protocol: opts.protocol,
            stop: stop.clone(),
            threads: Vec::new(),
            endpoint: None,
            bad_requests: Arc::new(AtomicU64::new(0)),
        };
        let busy = opts.busy_poll;
        let work = opts.work_per_request;
        match opts.protocol {
            Protocol::Tcp => {
                let listener = TcpListener::bind(opts.bind)
                    .map_err(|e| PerfError::io(format!("listen on TCP {}", opts.bind), e))?;
                server.addr = listener
                    .local_addr()
                    .map_err(|e| PerfError::io("TCP local address", e))?;
                server.spawn("tcp-accept".into(), move || {
                    tcp::serve(listener, busy, work, stop)
                })?;
            }
            Protocol::Udp => {
                let socket = UdpSocket::bind(opts.bind)
                    .map_err(|e| PerfError::io(format!("bind UDP {}", opts.bind), e))?;
                server.addr = socket
                    .local_addr()
                    .map_err(|e| PerfError::io("UDP local address", e))?;
                for i in 0..threads {
                    let socket = socket
                        .try_clone()
                        .map_err(|e| PerfError::io("clone UDP socket", e))?;
                    let stop = stop.clone();
                    server.spawn(format!("udp-server-{i}"), move || {
                        udp::serve(socket, busy, work, &stop)
                    })?;
                }
            }
            Protocol::Homa => {
                let mut config = opts.homa_config.clone();
                config.busy_poll |= busy;
                let max_response = config.core.max_message_size as usize;
                let endpoint = homa_rpc::bind(opts.bind, config)?;
                server.addr = endpoint.local_addr();
                server.endpoint = Some(endpoint.clone());
                for i in 0..threads {
                    let endpoint = endpoint.clone();
                    let stop = stop.clone();
                    let bad = server.bad_requests.clone();
                    server.spawn(format!("homa-server-{i}"), move || {
                        homa_rpc::serve(&endpoint, &stop, max_response, work, &bad)
                    })?;
                }
            }
        }
        tracing::info!("{} server on {}", opts.protocol, server.addr);
        Ok(server)
    }

    fn spawn(&mut self, name: String, f: impl FnOnce() + Send + 'static) -> Result<(), PerfError> {
        let h = std::thread::Builder::new()
            .name(name)
            .spawn(f)
            .map_err(|e| PerfError::io("start a server thread", e))?;
        self.threads.push(h);
        Ok(())
    }

    /// The address clients should use (the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The protocol served.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The Homa endpoint's counters (Homa servers only).
    pub fn homa_metrics(&self) -> Option<serde_json::Value> {
        self.endpoint
            .as_ref()
            .and_then(|e| serde_json::to_value(e.metrics()).ok())
    }

    /// The Homa endpoint (Homa servers only), for its counters.
    pub(crate) fn homa_endpoint(&self) -> Option<&homa::Endpoint> {
        self.endpoint.as_ref()
    }

    /// Homa requests whose pattern bytes were wrong (each answered with
    /// wrong bytes, so that its client counts an error too).
    pub fn bad_requests(&self) -> u64 {
        self.bad_requests.load(Ordering::Relaxed)
    }

    /// Everything a Homa server can say about itself, as one JSON object:
    /// the protocol core's metrics, the runtime's counters and the bad
    /// requests seen. `None` for TCP and UDP servers.
    pub fn homa_report(&self) -> Option<serde_json::Value> {
        let e = self.endpoint.as_ref()?;
        Some(serde_json::json!({
            "local": e.local_addr().to_string(),
            "bad_requests": self.bad_requests(),
            "metrics": serde_json::to_value(e.metrics()).ok()?,
            "runtime_stats": serde_json::to_value(e.runtime_stats()).ok()?,
        }))
    }

    /// Blocks until the server threads end (for the command-line server,
    /// which runs until it is killed or `stop_after` elapses).
    pub fn run(mut self, stop_after: Option<std::time::Duration>) {
        if let Some(d) = stop_after {
            std::thread::sleep(d);
            self.stop_and_join();
        } else {
            for h in std::mem::take(&mut self.threads) {
                let _ = h.join();
            }
        }
    }

    /// Stops the threads, waits for them and closes the sockets.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(e) = &self.endpoint {
            e.shutdown();
        }
        for h in std::mem::take(&mut self.threads) {
            if h.join().is_err() {
                tracing::error!("a {} server thread panicked", self.protocol);
            }
        }
        self.endpoint = None;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}
