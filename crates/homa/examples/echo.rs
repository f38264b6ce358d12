//! Homa echo RPCs, to make real traffic for a capture (the Wireshark
//! dissector's docs, docs/wireshark.md, use it).
//!
//! ```text
//! echo server [--raw] BIND_ADDR [SECONDS]
//! echo client [--raw] SERVER_ADDR SIZE[,SIZE...]
//! ```
//!
//! The server answers every request with its own bytes, for SECONDS
//! (default 10). The client sends one request of each size, checks that
//! every response is the exact echo and exits 0 when all are. `--raw`
//! talks raw IPv4 protocol 146 like Linux Homa (needs root or CAP_NET_RAW);
//! the default is Homa over UDP. Against Linux Homa's echo server in the
//! qemu kit of `../shared/linux-homa`:
//!
//! ```text
//! run.sh guest-server --pcap linux.pcap -- \
//!     target/debug/examples/echo client --raw 10.146.0.2:5000 1,1400,5000,60000,250000
//! ```

use homa::{Config, Endpoint, Error, Transport};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[path = "support/pattern.rs"]
mod support_pattern;
use support_pattern::pattern;

const USAGE: &str = "usage: echo server [--raw] BIND_ADDR [SECONDS]\n       \
                     echo client [--raw] SERVER_ADDR SIZE[,SIZE...]";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        return Err(USAGE.into());
    }
    let mode = args.remove(0);
    let raw = args.first().is_some_and(|a| a == "--raw");
    if raw {
        args.remove(0);
    }
    let mut config = Config::default();
    config.transport = if raw { Transport::Raw } else { Transport::Udp };
    match (mode.as_str(), args.as_slice()) {
        ("server", [addr]) => server(addr.parse()?, config, 10.0),
        ("server", [addr, secs]) => server(addr.parse()?, config, secs.parse()?),
        ("client", [addr, sizes]) => {
            let sizes: Vec<usize> = sizes
                .split(',')
                .map(|s| s.trim().parse())
                .collect::<Result<_, _>>()?;
            client(addr.parse()?, config, &sizes)
        }
        _ => Err(USAGE.into()),
    }
}

fn server(addr: SocketAddr, config: Config, secs: f64) -> Result<(), Box<dyn std::error::Error>> {
    let server = Endpoint::bind(addr, config)?;
    println!("echo server on {}", server.local_addr());
    let end = Instant::now() + Duration::from_secs_f64(secs);
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        match server.recv_request(Some(left)) {
            Ok(req) => server.reply(req.id, req.message)?,
            Err(Error::Timeout) => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

fn client(
    server: SocketAddr,
    config: Config,
    sizes: &[usize],
) -> Result<(), Box<dyn std::error::Error>> {
    let local: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    let client = Endpoint::bind(local, config)?;
    let mut failed = 0;
    for (i, &size) in sizes.iter().enumerate() {
        let request = pattern(i as u64, size);
        let start = Instant::now();
        match client.call(server, request.clone(), Duration::from_secs(30)) {
            Ok(response) if response == request => {
                println!("OK size={size} us={}", start.elapsed().as_micros());
            }
            Ok(response) => {
                failed += 1;
                println!(
                    "FAIL size={size} reason=echo-differs got={}",
                    response.len()
                );
            }
            Err(e) => {
                failed += 1;
                println!("FAIL size={size} reason={e}");
            }
        }
    }
    // Stay a moment so that the server's NEED_ACKs get their ACK.
    std::thread::sleep(Duration::from_millis(500));
    if failed > 0 {
        return Err(format!("{failed} of {} RPCs failed", sizes.len()).into());
    }
    Ok(())
}
