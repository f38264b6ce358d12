//! Messages over streams against one RPC per message: `homa-perf streams`.
//!
//! Both modes run a server and a client endpoint in this process on
//! loopback, `concurrency` client threads and as many server threads, and
//! move `size`-byte messages one way for `seconds`:
//! - `stream`: each client thread opens one stream and sends messages back
//!   to back (the stream's window is the only brake); a server thread per
//!   stream reads them;
//! - `rpc`: each client thread calls in a loop, one RPC per message with an
//!   empty response; server threads answer.
//!
//! Reported: messages per second delivered to the server, and the whole
//! process's CPU time (both ends, [`crate::contention::process_cpu_ns`])
//! per message.

use crate::contention::process_cpu_ns;
use crate::error::PerfError;
use bytes::Bytes;
use homa_measure::table::{markdown_table, Align};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What `homa-perf streams` measures.
#[derive(Debug, Clone)]
pub struct StreamsOptions {
    /// Client threads (streams, or RPC callers).
    pub concurrency: usize,
    /// Message size (bytes).
    pub size: usize,
    /// Length of each mode's run.
    pub seconds: f64,
    /// Runtime configuration of both endpoints.
    pub config: homa::Config,
}

/// One mode's numbers.
#[derive(Debug, Clone)]
pub struct ModeResult {
    /// `stream` or `rpc`.
    pub mode: &'static str,
    /// Messages delivered.
    pub messages: u64,
    /// Wall-clock time (s).
    pub seconds: f64,
    /// Process CPU time (ns) over the run.
    pub cpu_ns: u64,
}

impl ModeResult {
    /// Messages per second.
    pub fn rate(&self) -> f64 {
        self.messages as f64 / self.seconds
    }
    /// CPU µs per message.
    pub fn cpu_us_per_message(&self) -> f64 {
        self.cpu_ns as f64 / 1_000.0 / self.messages.max(1) as f64
    }
}

/// Runs both modes, streams first.
pub fn run_streams(o: &StreamsOptions) -> Result<Vec<ModeResult>, PerfError> {
    Ok(vec![run_mode(o, true)?, run_mode(o, false)?])
}

fn bind(config: &homa::Config) -> Result<homa::Endpoint, PerfError> {
    homa::Endpoint::bind("127.0.0.1:0".parse().expect("an address"), config.clone())
        .map_err(|e| PerfError::homa("bind Homa endpoint", e))
}

fn run_mode(o: &StreamsOptions, streams: bool) -> Result<ModeResult, PerfError> {
    let server = bind(&o.config)?;
    let client = bind(&o.config)?;
    let addr = server.local_addr();
    let delivered = Arc::new(AtomicU64::new(0));
    let counting = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let payload = Bytes::from(vec![0x5a; o.size]);
    let poll = Some(Duration::from_millis(50));
    let mut threads = Vec::new();
    for _ in 0..o.concurrency {
        let (server, d, c) = (server.clone(), delivered.clone(), counting.clone());
        threads.push(std::thread::spawn(move || {
            if streams {
                let Ok(s) = server.accept_stream(None) else {
                    return;
                };
                while let Ok(Some(_)) = s.recv(None) {
                    if c.load(Ordering::Relaxed) {
                        d.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let _ = s.finish();
            } else {
                // Served until the endpoint is shut down, after every
                // client has returned: a server thread that stopped with
                // the clients' flag left a request sent just before it
                // unanswered, and its client's call timed out (1 run in
                // ~70 of the unit test below).
                loop {
                    match server.recv_request(poll) {
                        Ok(r) => {
                            if c.load(Ordering::Relaxed) {
                                d.fetch_add(1, Ordering::Relaxed);
                            }
                            let _ = server.reply(r.id, Bytes::new());
                        }
                        Err(homa::Error::Timeout) => {}
                        Err(_) => break,
                    }
                }
            }
        }));
    }
    let mut clients = Vec::new();
    for _ in 0..o.concurrency {
        let (client, stop, payload) = (client.clone(), stop.clone(), payload.clone());
        clients.push(std::thread::spawn(move || -> Result<(), homa::Error> {
            if streams {
                let s = client.open_stream(addr)?;
                while !stop.load(Ordering::Relaxed) {
                    match s.send_timeout(payload.clone(), Some(Duration::from_millis(50))) {
                        Ok(()) | Err(homa::Error::Timeout) => {}
                        Err(e) => return Err(e),
                    }
                }
                s.finish()?;
                while s.recv(Some(Duration::from_secs(5)))?.is_some() {}
            } else {
                while !stop.load(Ordering::Relaxed) {
                    client.call(addr, payload.clone(), Duration::from_secs(5))?;
                }
            }
            Ok(())
        }));
    }
    // Warm up, then count.
    std::thread::sleep(Duration::from_millis(300));
    let cpu0 = process_cpu_ns();
    let t0 = Instant::now();
    counting.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs_f64(o.seconds));
    counting.store(false, Ordering::Relaxed);
    let cpu_ns = process_cpu_ns() - cpu0;
    let seconds = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let mut failure = None;
    for c in clients {
        if let Ok(Err(e)) = c.join() {
            failure.get_or_insert(e);
        }
    }
    server.shutdown();
    for t in threads {
        let _ = t.join();
    }
    if let Some(e) = failure {
        let mode = if streams { "stream" } else { "rpc" };
        return Err(PerfError::homa(format!("streams client ({mode} mode)"), e));
    }
    Ok(ModeResult {
        mode: if streams { "stream" } else { "rpc" },
        messages: delivered.load(Ordering::Relaxed),
        seconds,
        cpu_ns,
    })
}

/// The results as a markdown table.
pub fn streams_table(o: &StreamsOptions, r: &[ModeResult]) -> String {
    let rows: Vec<Vec<String>> = r
        .iter()
        .map(|m| {
            vec![
                m.mode.to_string(),
                o.concurrency.to_string(),
                o.size.to_string(),
                format!("{:.0}", m.rate()),
                format!("{:.2}", m.cpu_us_per_message()),
            ]
        })
        .collect();
    markdown_table(
        &[
            "mode",
            "concurrent",
            "size (B)",
            "messages/s",
            "CPU µs/message",
        ],
        &[
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
        ],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_modes_deliver_messages() {
        let o = StreamsOptions {
            concurrency: 2,
            size: 100,
            seconds: 0.2,
            config: homa::Config::loopback(),
        };
        let r = run_streams(&o).unwrap();
        assert_eq!(r.len(), 2);
        for m in &r {
            assert!(m.messages > 0, "{}: nothing delivered", m.mode);
        }
        let t = streams_table(&o, &r);
        assert!(t.contains("| stream |") && t.contains("| rpc |"), "{t}");
    }
}
