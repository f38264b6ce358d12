//! A small in-memory network for unit tests of any [`Transport`]: a few
//! hosts, no switches.
//!
//! Each host's NIC sends one packet at a time at the host link rate (the
//! transport is asked for its next packet only when the NIC is idle), and a
//! packet reaches its destination a fixed one-way delay after it has left
//! the NIC. There are no queues besides the NIC, no priorities, no
//! reordering; a test may drop chosen packets with [`TestNet::drop_if`].
//! Times are picoseconds, like the rest of the simulator.

use crate::engine::EventQueue;
use crate::topology::Packetization;
use crate::transport::{
    Delivered, HostEnv, HostId, PacketMeta, Protocol, SimPacket, Transport, TransportError,
};
use crate::{Time, PS_PER_NS};

/// Picoseconds per second.
const PS_PER_S: u128 = 1_000_000_000_000;

/// Shape of a [`TestNet`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestNetConfig {
    /// Number of hosts (at least 2).
    pub hosts: u32,
    /// Rate of every host's NIC (bit/s).
    pub link_bps: u64,
    /// From the end of a packet's transmission to its arrival (ps).
    pub one_way_delay: Time,
    /// Framing and headers.
    pub packetization: Packetization,
    /// Largest message the test sends (bytes), told to the transports.
    pub max_message: u64,
    /// Seed given to the transports.
    pub seed: u64,
}

impl Default for TestNetConfig {
    /// Three hosts, 10 Gbit/s, 1 µs one-way delay, messages up to 1 MB.
    fn default() -> Self {
        TestNetConfig {
            hosts: 3,
            link_bps: 10_000_000_000,
            one_way_delay: 1_000 * PS_PER_NS,
            packetization: Packetization::default(),
            max_message: 1_000_000,
            seed: 1,
        }
    }
}

/// A message delivered by the test network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// The receiving host.
    pub dst: HostId,
    /// What its transport reported.
    pub delivered: Delivered,
    /// When (ps).
    pub at: Time,
}

enum Event<B> {
    /// A packet reaches its destination.
    Arrive(SimPacket<B>),
    /// A host's NIC finished sending.
    NicFree(HostId),
    /// A host's transport timer may have expired.
    Timer(HostId),
}

struct Host<T> {
    transport: T,
    nic_busy: bool,
    /// The time of the timer event scheduled for this host, if any.
    timer: Option<Time>,
}

/// Packets a test chooses to lose.
type DropFilter = Box<dyn FnMut(&PacketMeta) -> bool>;

/// A few hosts running the transports of one [`Protocol`], connected
/// without switches (see the module documentation).
pub struct TestNet<P: Protocol> {
    config: TestNetConfig,
    hosts: Vec<Host<P::Host>>,
    events: EventQueue<Event<<P::Host as Transport>::Body>>,
    arrivals: Vec<Arrival>,
    drop: Option<DropFilter>,
    /// Packets sent (including dropped ones).
    pub packets_sent: u64,
    /// Packets dropped by the filter.
    pub packets_dropped: u64,
}

impl<P: Protocol> TestNet<P> {
    /// Builds `config.hosts` transports of `protocol`.
    pub fn new(protocol: &P, config: TestNetConfig) -> Result<TestNet<P>, TransportError> {
        let env = Self::env(&config);
        let hosts = (0..config.hosts)
            .map(|id| {
                Ok(Host {
                    transport: protocol.build_host(id, &env)?,
                    nic_busy: false,
                    timer: None,
                })
            })
            .collect::<Result<Vec<_>, TransportError>>()?;
        Ok(TestNet {
            config,
            hosts,
            events: EventQueue::new(),
            arrivals: Vec::new(),
            drop: None,
            packets_sent: 0,
            packets_dropped: 0,
        })
    }

    /// What the transports are told about the network: the round trip of
    /// a full packet out and a minimum packet back, and RTTbytes from it.
    fn env(c: &TestNetConfig) -> HostEnv {
        let p = c.packetization;
        let rtt =
            Self::tx_time(c, p.max_frame()) + Self::tx_time(c, p.min_frame) + 2 * c.one_way_delay;
        let wire = rtt as u128 * c.link_bps as u128 / (8 * PS_PER_S);
        HostEnv {
            hosts: c.hosts,
            host_link_bps: c.link_bps,
            rtt,
            rtt_bytes: (wire * p.max_payload() as u128 / p.max_frame() as u128) as u64,
            packetization: p,
            max_message: c.max_message,
            size_sample: vec![c.max_message.min(u32::MAX as u64) as u32].into(),
            seed: c.seed,
        }
    }

    /// Time to put `wire_bytes` on the link (ps).
    fn tx_time(c: &TestNetConfig, wire_bytes: u32) -> Time {
        (wire_bytes as u128 * 8 * PS_PER_S / c.link_bps as u128) as Time
    }

    /// Loses every packet for which `filter` returns true.
    pub fn drop_if(&mut self, filter: impl FnMut(&PacketMeta) -> bool + 'static) {
        self.drop = Some(Box::new(filter));
    }

    /// The current time (ps).
    pub fn now(&self) -> Time {
        self.events.now()
    }

    /// Host `id`'s transport.
    pub fn host(&self, id: HostId) -> &P::Host {
        &self.hosts[id as usize].transport
    }

    /// Messages delivered so far, in delivery order.
    pub fn arrivals(&self) -> &[Arrival] {
        &self.arrivals
    }

    /// Host `src` starts a message of `size` bytes to `dst` now; returns
    /// the key its transport gave the message.
    pub fn send(&mut self, src: HostId, dst: HostId, size: u64) -> Result<u64, TransportError> {
        let now = self.now();
        let key = self.hosts[src as usize]
            .transport
            .start_message(now, dst, size)?;
        self.service(src);
        Ok(key)
    }

    /// Processes events until none is left or the next one is after
    /// `until` (ps). Returns true if no event is left (nothing in flight,
    /// no timer set).
    pub fn run_until(&mut self, until: Time) -> bool {
        while let Some(t) = self.events.peek_time() {
            if t > until {
                return false;
            }
            let Some((now, event)) = self.events.pop() else {
                break;
            };
            let h = match event {
                Event::Arrive(packet) => {
                    let dst = packet.meta.dst;
                    self.hosts[dst as usize].transport.receive(now, packet);
                    dst
                }
                Event::NicFree(h) => {
                    self.hosts[h as usize].nic_busy = false;
                    h
                }
                Event::Timer(h) => {
                    let host = &mut self.hosts[h as usize];
                    host.timer = None;
                    if host.transport.next_timeout().is_some_and(|t| t <= now) {
                        host.transport.on_timeout(now);
                    }
                    h
                }
            };
            self.service(h);
        }
        true
    }

    /// After anything happened at host `h`: collect its deliveries, start
    /// its NIC if it is idle, and keep a timer event at its next timeout.
    fn service(&mut self, h: HostId) {
        let now = self.now();
        let host = &mut self.hosts[h as usize];
        while let Some(delivered) = host.transport.poll_delivered() {
            self.arrivals.push(Arrival {
                dst: h,
                delivered,
                at: now,
            });
        }
        if !host.nic_busy {
            if let Some(packet) = host.transport.poll_transmit(now) {
                host.nic_busy = true;
                self.packets_sent += 1;
                let done = now + Self::tx_time(&self.config, packet.meta.wire_bytes);
                self.events.schedule(done, Event::NicFree(h));
                let lost = self.drop.as_mut().is_some_and(|f| f(&packet.meta));
                if lost {
                    self.packets_dropped += 1;
                } else {
                    let at = done + self.config.one_way_delay;
                    self.events.schedule(at, Event::Arrive(packet));
                }
            }
        }
        if let Some(t) = host.transport.next_timeout() {
            if host.timer.is_none_or(|scheduled| t < scheduled) {
                host.timer = Some(t);
                self.events.schedule(t, Event::Timer(h));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::homa::{Homa, HomaConfig};
    use crate::pfabric::PFabric;

    /// 1 ms of simulated time.
    const MS: Time = 1_000_000_000;

    /// Sends every message of `sizes` from host `i % 3` to `(i + 1) % 3`,
    /// runs `net` for up to `ms` milliseconds and checks that each arrived
    /// exactly once at its destination.
    fn all_arrive<P: Protocol>(net: &mut TestNet<P>, sizes: &[u64], ms: Time) {
        let mut want = Vec::new();
        for (i, &size) in sizes.iter().enumerate() {
            let (src, dst) = (i as u32 % 3, (i as u32 + 1) % 3);
            let key = net.send(src, dst, size).unwrap();
            want.push((dst, src, key));
        }
        net.run_until(ms * MS);
        let mut got: Vec<(u32, u32, u64)> = net
            .arrivals()
            .iter()
            .map(|a| (a.dst, a.delivered.src, a.delivered.key))
            .collect();
        got.sort_unstable();
        want.sort_unstable();
        assert_eq!(got, want);
    }

    /// Loses the first transmission of the data packets whose number
    /// among all packets sent is a multiple of 7.
    fn drop_some_data<P: Protocol>(net: &mut TestNet<P>) {
        let mut n = 0u64;
        net.drop_if(move |m| {
            n += 1;
            m.payload_bytes > 0 && !m.retransmit && n % 7 == 0
        });
    }

    const SIZES: [u64; 6] = [1, 100, 1_500, 10_000, 100_000, 1_000_000];

    #[test]
    fn homa_delivers_every_message() {
        let mut net =
            TestNet::new(&Homa::new(HomaConfig::default()), TestNetConfig::default()).unwrap();
        all_arrive(&mut net, &SIZES, 10);
        assert_eq!(net.packets_dropped, 0);
    }

    #[test]
    fn homa_recovers_lost_packets() {
        let mut net =
            TestNet::new(&Homa::new(HomaConfig::default()), TestNetConfig::default()).unwrap();
        drop_some_data(&mut net);
        // Loss is noticed only after the resend timeouts.
        all_arrive(&mut net, &SIZES, 1_000);
        assert!(net.packets_dropped > 0);
    }

    #[test]
    fn pfabric_delivers_every_message() {
        let mut net = TestNet::new(&PFabric::default(), TestNetConfig::default()).unwrap();
        all_arrive(&mut net, &SIZES, 10);
    }

    #[test]
    fn pfabric_recovers_lost_packets() {
        let mut net = TestNet::new(&PFabric::default(), TestNetConfig::default()).unwrap();
        drop_some_data(&mut net);
        // Loss is noticed only after the resend timeouts.
        all_arrive(&mut net, &SIZES, 1_000);
        assert!(net.packets_dropped > 0);
    }

    #[test]
    fn a_lone_packet_takes_its_transmission_time_plus_the_delay() {
        let c = TestNetConfig::default();
        let mut net = TestNet::new(&PFabric::default(), c.clone()).unwrap();
        net.send(0, 1, 100).unwrap();
        net.run_until(MS);
        let a = net.arrivals()[0];
        let wire = c.packetization.message_wire_bytes(100) as u32;
        let tx = TestNet::<PFabric>::tx_time(&c, wire);
        assert_eq!((a.dst, a.at), (1, tx + c.one_way_delay));
    }
}
