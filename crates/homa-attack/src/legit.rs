//! Legitimate load: a well-behaved Homa client in this process that keeps a
//! few echo RPCs outstanding against the target and counts completions, so
//! that scenarios can report what an attack costs real users.

use crate::Result;
use bytes::Bytes;
use serde::Serialize;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// An RPC not answered within this long is abandoned and counted as failed.
pub const RPC_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Counters {
    completed: AtomicU64,
    failed: AtomicU64,
    wrong: AtomicU64,
}

/// A running legitimate client.
pub struct LegitLoad {
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

/// Completions in one interval.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Interval {
    /// Seconds the interval lasted.
    pub seconds: f64,
    /// RPCs that completed correctly in it.
    pub completed: u64,
    /// RPCs per second.
    pub rpc_per_s: f64,
}

impl LegitLoad {
    /// Starts `concurrency` outstanding echo RPCs of `size` bytes each
    /// against `server`.
    pub fn start(server: SocketAddr, size: usize, concurrency: usize) -> Result<LegitLoad> {
        Self::start_paced(server, size, concurrency, None)
    }

    /// Like [`LegitLoad::start`], but starts at most `rate` RPCs per second
    /// (a client that does not use all the CPU it could, so that what an
    /// attack takes from it is not hidden by what the attacker's own CPU
    /// use takes on a small machine).
    pub fn start_paced(
        server: SocketAddr,
        size: usize,
        concurrency: usize,
        rate: Option<f64>,
    ) -> Result<LegitLoad> {
        let client = homa::Endpoint::bind(
            "127.0.0.1:0".parse().expect("literal"),
            homa::Config::default(),
        )?;
        let counters = Arc::new(Counters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counters.clone(), stop.clone());
        let handle = std::thread::Builder::new()
            .name("legit-load".into())
            .spawn(move || run(client, server, size, concurrency.max(1), rate, &c, &s))?;
        Ok(LegitLoad {
            counters,
            stop,
            handle: Some(handle),
        })
    }

    /// RPCs completed correctly so far.
    pub fn completed(&self) -> u64 {
        self.counters.completed.load(Ordering::Relaxed)
    }

    /// RPCs that failed or were abandoned after [`RPC_TIMEOUT`].
    pub fn failed(&self) -> u64 {
        self.counters.failed.load(Ordering::Relaxed)
    }

    /// Responses whose bytes differed from the request.
    pub fn wrong(&self) -> u64 {
        self.counters.wrong.load(Ordering::Relaxed)
    }

    /// Counts completions over the next `d`.
    pub fn measure(&self, d: Duration) -> Interval {
        let before = self.completed();
        let t0 = Instant::now();
        std::thread::sleep(d);
        let seconds = t0.elapsed().as_secs_f64();
        let completed = self.completed() - before;
        Interval {
            seconds,
            completed,
            rpc_per_s: completed as f64 / seconds,
        }
    }
}

impl Drop for LegitLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn run(
    client: homa::Endpoint,
    server: SocketAddr,
    size: usize,
    concurrency: usize,
    rate: Option<f64>,
    c: &Counters,
    stop: &AtomicBool,
) {
    let gap = rate.map(|r| Duration::from_secs_f64(1.0 / r));
    let mut next_start = Instant::now();
    let mut seq: u64 = 0;
    let mut outstanding: HashMap<homa::RpcId, (Instant, Bytes)> = HashMap::new();
    let mut next_request = || {
        seq += 1;
        let mut v = vec![0u8; size.max(8)];
        v[..8].copy_from_slice(&seq.to_be_bytes());
        Bytes::from(v)
    };
    while !stop.load(Ordering::Acquire) {
        while outstanding.len() < concurrency {
            if let Some(gap) = gap {
                let now = Instant::now();
                if now < next_start {
                    break;
                }
                // (No burst to catch up after a stall.)
                next_start = next_start.max(now - gap) + gap;
            }
            let req = next_request();
            match client.send_request(server, req.clone()) {
                Ok(id) => {
                    outstanding.insert(id, (Instant::now(), req));
                }
                Err(_) => {
                    c.failed.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(10));
                    break;
                }
            }
        }
        let mut wait = Duration::from_millis(50);
        if gap.is_some() && outstanding.len() < concurrency {
            wait = wait.min(next_start.saturating_duration_since(Instant::now()));
        }
        match client.recv_any_response(Some(wait)) {
            Ok((id, result)) => {
                let Some((_, req)) = outstanding.remove(&id) else {
                    continue;
                };
                match result {
                    Ok(resp) if resp == req => c.completed.fetch_add(1, Ordering::Relaxed),
                    Ok(_) => c.wrong.fetch_add(1, Ordering::Relaxed),
                    Err(_) => c.failed.fetch_add(1, Ordering::Relaxed),
                };
            }
            Err(homa::Error::Timeout) | Err(homa::Error::NothingOutstanding) => {}
            Err(_) => return,
        }
        let now = Instant::now();
        let late: Vec<homa::RpcId> = outstanding
            .iter()
            .filter(|(_, (t, _))| now.duration_since(*t) > RPC_TIMEOUT)
            .map(|(id, _)| *id)
            .collect();
        for id in late {
            outstanding.remove(&id);
            let _ = client.abort(id);
            c.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
    client.shutdown();
}
