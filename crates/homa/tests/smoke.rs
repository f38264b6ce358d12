use bytes::Bytes;
use homa::{Config, Endpoint};
use std::time::{Duration, Instant};

#[test]
fn echo_over_udp_loopback() {
    let server = Endpoint::bind("127.0.0.1:0".parse().unwrap(), Config::default()).unwrap();
    let addr = server.local_addr();
    let s = server.clone();
    let t = std::thread::spawn(move || {
        while let Ok(req) = s.recv_request(None) {
            s.reply(req.id, req.message).unwrap();
        }
    });
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), Config::default()).unwrap();
    for len in [0usize, 1, 100, 1415, 1416, 1417, 100_000, 1_000_000] {
        let msg: Bytes = (0..len).map(|i| i as u8).collect::<Vec<u8>>().into();
        let r = client
            .call(addr, msg.clone(), Duration::from_secs(5))
            .unwrap();
        assert_eq!(r, msg, "len {len}");
    }
    let start = Instant::now();
    for _ in 0..2000 {
        client
            .call(addr, Bytes::from_static(&[0; 100]), Duration::from_secs(5))
            .unwrap();
    }
    eprintln!("100 B RTT mean: {:?}", start.elapsed() / 2000);
    server.shutdown();
    t.join().unwrap();
}
