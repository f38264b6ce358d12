//! The simulation: hosts running a transport, a leaf–spine network of
//! egress ports, traffic generation, and measurement.

use crate::background::{self, Background};
use crate::engine::EventQueue;
use crate::port::{Admit, Discipline, Port, Queued};
use crate::report::{Bucket, PortReport, QueueStats, RunReport, SlowdownStats, SwitchQueueStats};
use crate::scenario::{Pattern, Scenario};
use crate::switches::Switches;
use crate::topology::{tx_time, Next, PortKind, Topology, TopologyError, UplinkSelection};
use crate::transport::{
    HostEnv, HostId, Protocol, QueueDiscipline, SimPacket, Transport, TransportError,
};
use crate::workload::{PoissonArrivals, SizeDist, WorkloadError};
use crate::Time;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::time::Instant;

mod measure;
mod network;

use measure::WindowSnapshot;

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Bad topology.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// Bad workload.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// The transport refused its configuration.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// Anything else about the scenario.
    #[error("invalid scenario: {0}")]
    Scenario(String),
}

/// Sizes in [`HostEnv::size_sample`].
const SIZE_SAMPLE: usize = 10_000;

/// Progress callback: (messages completed, messages to complete).
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64);

#[derive(Debug, Clone, Copy)]
enum Ev {
    /// A port finished transmitting its current packet.
    TxDone(u32),
    /// A packet reaches an egress port's queue.
    Enqueue { port: u32, pkt: u32 },
    /// A packet reaches a host's transport.
    Deliver { host: u32, pkt: u32 },
    /// A host's transport timer.
    Timer(u32),
    /// The next Poisson arrival at a host.
    Arrival(u32),
    /// An incast round starts.
    IncastRound(u32),
    /// A round of the incast overlay starts.
    OverlayRound,
    /// Background flow `i` sends its next frame.
    Background(u32),
}

/// One generated message.
#[derive(Debug, Clone, Copy)]
struct Message {
    size: u64,
    start: Time,
    end: Option<Time>,
    same_rack: bool,
    src: HostId,
    dst: HostId,
    /// Part of the incast overlay (not measured, not counted in `to_generate`).
    overlay: bool,
}

struct Host<T> {
    transport: T,
    /// Deadline the transport asked for.
    timer_at: Option<Time>,
    /// Earliest timer event in the queue.
    timer_scheduled: Option<Time>,
    /// Wasted-bandwidth bookkeeping: whether the downlink is idle while
    /// the transport could use it, since when.
    wasting: bool,
    wasting_since: Time,
    wasted: Time,
}

/// Packet storage: slots reused through a free list.
struct Slab<B> {
    slots: Vec<Option<SimPacket<B>>>,
    free: Vec<u32>,
}

impl<B> Slab<B> {
    fn insert(&mut self, p: SimPacket<B>) -> u32 {
        if let Some(i) = self.free.pop() {
            self.slots[i as usize] = Some(p);
            i
        } else {
            self.slots.push(Some(p));
            (self.slots.len() - 1) as u32
        }
    }
    fn get(&self, i: u32) -> &SimPacket<B> {
        self.slots[i as usize].as_ref().expect("live packet")
    }
    fn get_mut(&mut self, i: u32) -> &mut SimPacket<B> {
        self.slots[i as usize].as_mut().expect("live packet")
    }
    fn remove(&mut self, i: u32) -> SimPacket<B> {
        self.free.push(i);
        self.slots[i as usize].take().expect("live packet")
    }
}

/// A simulation in progress.
pub struct Simulation<P: Protocol + Clone> {
    scenario: Scenario,
    protocol_name: &'static str,
    protocol: P,
    topo: Topology,
    dist: SizeDist,
    env: HostEnv,
    events: EventQueue<Ev>,
    hosts: Vec<Host<P::Host>>,
    ports: Vec<Port>,
    /// Per port: delay from end of transmission to the next queue.
    hop_delay: Vec<Time>,
    packets: Slab<<P::Host as Transport>::Body>,
    rng: ChaCha8Rng,
    /// Spraying's own random stream: the workload drawn from `rng` must not
    /// depend on how many packets a protocol sends.
    spray_rng: ChaCha8Rng,
    arrivals: Option<PoissonArrivals>,
    nic_limit: u64,
    max_frame: u64,
    messages: Vec<Message>,
    in_flight: FxHashMap<(HostId, u64), u32>,
    to_generate: u64,
    warmup: u64,
    completed: u64,
    failed_to_start: u64,
    window_start: Option<Time>,
    window_end: Option<Time>,
    /// Wire bytes of data packets of messages generated in the window.
    offered_wire: u64,
    /// Wire bytes of first-time data packets delivered in the window.
    delivered_wire: u64,
    window_snapshot: Option<WindowSnapshot>,
    /// Message bytes generated since the window opened, and (generated,
    /// distinct bytes received) at the window's midpoint (by count).
    offered_data: u64,
    mid: Option<(u64, u64)>,
    /// Message bytes received in data packets, duplicates included.
    payload_received: u64,
    /// `unique_received()` when the window opened.
    window_base: u64,
    /// Overlay messages generated.
    overlay_generated: u64,
    /// The overlay's own random stream (the background traffic is the same
    /// with and without it).
    overlay_rng: ChaCha8Rng,
    /// Whole-switch buffer occupancy.
    switches: Switches,
    /// Constant-rate background flows into downlinks.
    background: Background,
}

impl<P: Protocol + Clone> Simulation<P> {
    /// Builds the network, the hosts and the traffic of `scenario`.
    pub fn new(scenario: Scenario, protocol: &P) -> Result<Simulation<P>, SimError> {
        scenario
            .validate()
            .map_err(|e| SimError::Scenario(e.to_string()))?;
        let topo = Topology::new(scenario.topology.clone())?;
        let mut dist = SizeDist::by_name(&scenario.traffic.workload)?;
        if let Some(cap) = scenario.traffic.max_message {
            dist = dist.capped(cap);
        }
        let pk = topo.config.packetization;
        let env = HostEnv {
            hosts: topo.hosts,
            host_link_bps: topo.host_bps,
            rtt: topo.rtt(),
            rtt_bytes: topo.rtt_bytes(),
            packetization: pk,
            max_message: dist.max().max(1),
            size_sample: {
                let mut r = ChaCha8Rng::seed_from_u64(scenario.seed ^ 0x5A3B_1E5E_ED00_0001);
                (0..SIZE_SAMPLE)
                    .map(|_| dist.sample(&mut r).min(u32::MAX as u64) as u32)
                    .collect()
            },
            seed: scenario.seed,
        };
        if topo.hosts < 2 {
            return Err(SimError::Scenario("at least two hosts are needed".into()));
        }
        let (to_generate, arrivals) = match scenario.traffic.pattern {
            Pattern::Poisson => {
                let rate = PoissonArrivals::rate_for_load(
                    scenario.traffic.load,
                    topo.host_bps,
                    dist.mean_wire_bytes(&pk)
                        + dist
                            .rows()
                            .map(|(size, mass)| {
                                protocol.message_overhead_bytes(size, &env) as f64 * mass
                            })
                            .sum::<f64>(),
                );
                (scenario.messages, Some(PoissonArrivals::new(rate)?))
            }
            Pattern::Incast => {
                let i = &scenario.traffic.incast;
                if i.senders >= topo.hosts {
                    return Err(SimError::Scenario(format!(
                        "incast.senders {} must be below the number of hosts {}",
                        i.senders, topo.hosts
                    )));
                }
                (i.senders as u64 * i.rounds as u64, None)
            }
        };
        if let Some(o) = &scenario.traffic.overlay {
            if o.senders >= topo.hosts {
                return Err(SimError::Scenario(format!(
                    "overlay.senders {} must be below the number of hosts {}",
                    o.senders, topo.hosts
                )));
            }
        }
        let queue = match (protocol.queue_discipline(), scenario.switch.priorities) {
            (QueueDiscipline::Rank, _) => Discipline::Rank,
            (QueueDiscipline::StrictPriority, true) => Discipline::StrictPriority,
            (QueueDiscipline::StrictPriority, false) => Discipline::Fifo,
        };
        let buffer = scenario
            .switch
            .buffer_bytes
            .or_else(|| protocol.default_buffer_bytes(&env));
        let mut ports = Vec::with_capacity(topo.num_ports());
        let mut hop_delay = Vec::with_capacity(topo.num_ports());
        for (i, (kind, bps, next)) in topo.ports().into_iter().enumerate() {
            let (d, b, e) = if kind == PortKind::HostNic {
                (Discipline::Fifo, None, None)
            } else {
                (queue, buffer, scenario.switch.ecn_threshold_bytes)
            };
            ports.push(Port::new(kind, bps, next, d, b, e));
            hop_delay.push(topo.port_hop_delay(i, kind));
        }
        let mut hosts = Vec::with_capacity(topo.hosts as usize);
        for h in 0..topo.hosts {
            // A host whose link rate is overridden configures itself for
            // its own link; RTTbytes stays the network's nominal one.
            let transport = if topo.host_bps_of(h) == topo.host_bps {
                protocol.build_host(h, &env)?
            } else {
                let mut own = env.clone();
                own.host_link_bps = topo.host_bps_of(h);
                protocol.build_host(h, &own)?
            };
            hosts.push(Host {
                transport,
                timer_at: None,
                timer_scheduled: None,
                wasting: false,
                wasting_since: 0,
                wasted: 0,
            });
        }
        let max_frame = pk.max_frame() as u64;
        let background = Background::new(&scenario.traffic.background, &topo, pk.max_frame())
            .map_err(SimError::Scenario)?;
        let scenario_seed = scenario.seed;
        let topo_for_switches = topo.clone();
        let warmup = (to_generate as f64 * scenario.warmup_fraction) as u64;
        Ok(Simulation {
            protocol_name: protocol.name(),
            protocol: protocol.clone(),
            nic_limit: (scenario.nic_queue_packets * max_frame as f64).round() as u64,
            max_frame,
            rng: ChaCha8Rng::seed_from_u64(scenario.seed),
            spray_rng: ChaCha8Rng::seed_from_u64(scenario.seed ^ 0x5350_5241_5953_5052),
            scenario,
            topo,
            dist,
            env,
            events: EventQueue::new(),
            hosts,
            ports,
            hop_delay,
            packets: Slab {
                slots: Vec::new(),
                free: Vec::new(),
            },
            arrivals,
            messages: Vec::with_capacity(to_generate.min(1 << 24) as usize),
            in_flight: FxHashMap::default(),
            to_generate,
            warmup,
            completed: 0,
            failed_to_start: 0,
            window_start: None,
            window_end: None,
            offered_wire: 0,
            delivered_wire: 0,
            window_snapshot: None,
            offered_data: 0,
            mid: None,
            payload_received: 0,
            window_base: 0,
            overlay_generated: 0,
            overlay_rng: ChaCha8Rng::seed_from_u64(scenario_seed ^ 0x4F56_4552_4C41_5921),
            switches: Switches::new(&topo_for_switches),
            background,
        })
    }

    /// The derived network facts the transports were built with.
    pub fn env(&self) -> &HostEnv {
        &self.env
    }

    /// The topology.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// The transport of host `h`.
    pub fn transport(&self, h: HostId) -> &P::Host {
        &self.hosts[h as usize].transport
    }

    /// Starts a message now from `src` to `dst`, outside the scenario's
    /// traffic (used by tests). Returns its index.
    pub fn inject(&mut self, at: Time, src: HostId, dst: HostId, size: u64) -> usize {
        // Everything due before `at` happens first, so no transport sees
        // time go backwards.
        self.run_until(at);
        let now = self.events.now().max(at);
        self.start_message(now, src, dst, size, false);
        self.messages.len() - 1
    }

    /// Completion time of message `i`, if it has completed.
    pub fn completion_time(&self, i: usize) -> Option<Time> {
        let m = self.messages.get(i)?;
        m.end.map(|e| e - m.start)
    }

    /// Runs until every generated message has completed or the drain limit
    /// passes, then reports.
    pub fn run(self, progress: Option<Progress<'_>>) -> RunReport {
        self.run_inspect(progress, |_| ()).0
    }

    /// [`Simulation::run`], and `inspect` looks at the hosts' final state
    /// (e.g. the transports' per-peer state) before the report is made.
    pub fn run_inspect<R>(
        mut self,
        progress: Option<Progress<'_>>,
        inspect: impl FnOnce(&Self) -> R,
    ) -> (RunReport, R) {
        let wall = self.run_events(progress);
        let r = inspect(&self);
        (self.report(wall), r)
    }

    /// The event loop of [`Simulation::run`]; returns the wall time (s).
    fn run_events(&mut self, mut progress: Option<Progress<'_>>) -> f64 {
        let wall = Instant::now();
        match self.scenario.traffic.pattern {
            Pattern::Poisson => {
                for h in 0..self.topo.hosts {
                    let gap = self.next_gap();
                    self.events.schedule(gap, Ev::Arrival(h));
                }
            }
            Pattern::Incast => self.events.schedule(0, Ev::IncastRound(0)),
        }
        if let Some(o) = &self.scenario.traffic.overlay {
            // A random phase, so the first round is not at time 0.
            let first = self.overlay_rng.gen_range(0.0..1.0) * o.interval_us;
            self.events
                .schedule(crate::topology::ns(first * 1000.0), Ev::OverlayRound);
        }
        // Background flows start at random phases (their own stream: the
        // workload does not change with them).
        let mut phase = ChaCha8Rng::seed_from_u64(self.scenario.seed ^ 0x4247_464C_4F57_5321);
        for (i, f) in self.background.flows.iter().enumerate() {
            let first = phase.gen_range(0..f.period);
            self.events.schedule(first, Ev::Background(i as u32));
        }
        if self.warmup == 0 {
            self.open_window(0);
        }
        let mut deadline = Time::MAX;
        let mut next_progress = 0;
        while let Some((now, ev)) = self.events.pop() {
            if now > deadline {
                break;
            }
            self.dispatch(now, ev);
            if self.window_end.is_some() && deadline == Time::MAX {
                let end = self.window_end.unwrap_or(now);
                let span = end - self.window_start.unwrap_or(0);
                // Stragglers: the drain share of the window, plus time for
                // the largest message to cross an empty link a few times.
                let pk = &self.topo.config.packetization;
                let largest = pk.message_wire_bytes(self.dist.max());
                let largest_time = tx_time(largest, self.topo.host_bps);
                deadline = end
                    + (span as f64 * self.scenario.drain_factor) as Time
                    + 4 * largest_time
                    + 10_000_000_000;
            }
            if self.generated() == self.to_generate
                && self.completed + self.failed_to_start == self.to_generate
            {
                break;
            }
            if let Some(p) = progress.as_mut() {
                if self.events.processed() >= next_progress {
                    next_progress = self.events.processed() + (1 << 16);
                    p(self.completed, self.to_generate);
                }
            }
        }
        if let Some(p) = progress.as_mut() {
            p(self.completed, self.to_generate);
        }
        let now = self.events.now();
        if self.window_snapshot.is_none() {
            self.close_window(now);
        }
        wall.elapsed().as_secs_f64()
    }

    /// Runs until simulated time `until` (for tests that inject messages).
    pub fn run_until(&mut self, until: Time) {
        while let Some(t) = self.events.peek_time() {
            if t > until {
                break;
            }
            let (now, ev) = self.events.pop().expect("peeked");
            self.dispatch(now, ev);
        }
    }

    /// Background messages generated (the overlay's not counted).
    fn generated(&self) -> u64 {
        self.messages.len() as u64 - self.overlay_generated
    }

    fn next_gap(&mut self) -> Time {
        match self.arrivals.as_mut() {
            Some(a) => a.next_gap_ps(&mut self.rng),
            None => Time::MAX,
        }
    }

    fn dispatch(&mut self, now: Time, ev: Ev) {
        match ev {
            Ev::TxDone(p) => self.tx_done(now, p),
            Ev::Enqueue { port, pkt } => self.enqueue(now, port, pkt),
            Ev::Deliver { host, pkt } => {
                let packet = self.packets.remove(pkt);
                if self.window_start.is_some() && self.window_end.is_none() {
                    let m = &packet.meta;
                    if m.payload_bytes > 0 && !m.retransmit {
                        self.delivered_wire += m.wire_bytes as u64;
                    }
                }
                if packet.meta.payload_bytes > 0 {
                    self.payload_received += packet.meta.payload_bytes as u64;
                }
                self.hosts[host as usize].transport.receive(now, packet);
                self.service(now, host);
            }
            Ev::Timer(h) => {
                let host = &mut self.hosts[h as usize];
                if host.timer_scheduled == Some(now) {
                    host.timer_scheduled = None;
                }
                if host.timer_at.is_some_and(|t| t <= now) {
                    host.timer_at = None;
                    host.transport.on_timeout(now);
                }
                self.service(now, h);
            }
            Ev::Arrival(h) => {
                if self.generated() < self.to_generate {
                    let size = self.dist.sample(&mut self.rng);
                    let mut dst = self.rng.gen_range(0..self.topo.hosts - 1);
                    if dst >= h {
                        dst += 1;
                    }
                    self.start_message(now, h, dst, size, false);
                    if self.generated() < self.to_generate {
                        let gap = self.next_gap();
                        self.events
                            .schedule(now.saturating_add(gap), Ev::Arrival(h));
                    }
                }
            }
            Ev::IncastRound(r) => {
                let i = self.scenario.traffic.incast.clone();
                for s in 1..=i.senders {
                    let size = self.dist.sample(&mut self.rng);
                    self.start_message(now, s, 0, size, false);
                }
                if r + 1 < i.rounds {
                    let next = now + crate::topology::ns(i.interval_us * 1000.0);
                    self.events.schedule(next, Ev::IncastRound(r + 1));
                }
            }
            Ev::OverlayRound => {
                // The overlay runs while background messages arrive.
                if self.generated() >= self.to_generate {
                    return;
                }
                let Some(o) = self.scenario.traffic.overlay.clone() else {
                    return;
                };
                let hosts = self.topo.hosts;
                let dst = self.overlay_rng.gen_range(0..hosts);
                let others = rand::seq::index::sample(
                    &mut self.overlay_rng,
                    hosts as usize - 1,
                    o.senders as usize,
                );
                for i in others.iter() {
                    let mut src = i as HostId;
                    if src >= dst {
                        src += 1;
                    }
                    self.start_message(now, src, dst, o.message_bytes, true);
                }
                let next = now + crate::topology::ns(o.interval_us * 1000.0);
                self.events.schedule(next, Ev::OverlayRound);
            }
            Ev::Background(i) => {
                let f = self.background.flows[i as usize];
                self.background.total.sent_frames += 1;
                let q = Queued {
                    idx: Background::index(i),
                    bytes: self.background.frame_bytes,
                    priority: f.priority,
                    rank: u64::MAX,
                    dst: f.host,
                };
                self.admit(now, self.topo.tor_down(f.host), q);
                self.events.schedule(now + f.period, Ev::Background(i));
            }
        }
    }

    fn start_message(&mut self, now: Time, src: HostId, dst: HostId, size: u64, overlay: bool) {
        let idx = self.messages.len() as u32;
        self.messages.push(Message {
            size,
            start: now,
            end: None,
            same_rack: self.topo.rack_of(src) == self.topo.rack_of(dst),
            src,
            dst,
            overlay,
        });
        self.overlay_generated += overlay as u64;
        let n = self.generated();
        if overlay {
            // Counted in the offered load, nothing else.
        } else if n == self.warmup + 1 && self.window_start.is_none() {
            self.open_window(now);
        }
        if self.window_start.is_some() && self.window_end.is_none() {
            let data = self.topo.config.packetization.message_wire_bytes(size);
            self.offered_wire += data + self.overhead(size);
            self.offered_data += size;
        }
        if !overlay && n == self.warmup + (self.to_generate - self.warmup) / 2 && self.mid.is_none()
        {
            self.mid = Some((self.offered_data, self.unique_received()));
        }
        match self.hosts[src as usize]
            .transport
            .start_message(now, dst, size)
        {
            Ok(key) => {
                self.in_flight.insert((src, key), idx);
            }
            Err(e) => {
                tracing::warn!(%e, "message not started");
                self.failed_to_start += !overlay as u64;
            }
        }
        if !overlay && n == self.to_generate {
            self.close_window(now);
        }
        self.service(now, src);
    }

    /// Distinct message bytes the hosts have received so far.
    fn unique_received(&self) -> u64 {
        let dups: u64 = self
            .hosts
            .iter()
            .map(|h| h.transport.duplicate_payload_bytes())
            .sum();
        self.payload_received.saturating_sub(dups)
    }

    fn overhead(&self, size: u64) -> u64 {
        self.protocol.message_overhead_bytes(size, &self.env)
    }

    /// After anything touched host `h`'s transport: collect deliveries, feed
    /// the NIC, rearm the timer, update the wasted-bandwidth state.
    fn service(&mut self, now: Time, h: HostId) {
        while let Some(d) = self.hosts[h as usize].transport.poll_delivered() {
            if let Some(idx) = self.in_flight.remove(&(d.src, d.key)) {
                let m = &mut self.messages[idx as usize];
                if m.end.is_none() {
                    m.end = Some(now);
                    self.completed += !m.overlay as u64;
                }
            }
        }
        self.fill_nic(now, h);
        let host = &mut self.hosts[h as usize];
        let t = host.transport.next_timeout();
        host.timer_at = t;
        if let Some(t) = t {
            if host.timer_scheduled.is_none_or(|s| t < s) {
                host.timer_scheduled = Some(t);
                self.events.schedule(t, Ev::Timer(h));
            }
        }
        self.update_waste(now, h);
    }

    fn update_waste(&mut self, now: Time, h: HostId) {
        let idle = !self.ports[self.topo.tor_down(h)].is_busy();
        let host = &mut self.hosts[h as usize];
        let wasting = idle && host.transport.has_grantable_incoming();
        if wasting != host.wasting {
            if host.wasting {
                host.wasted += now - host.wasting_since;
            }
            host.wasting = wasting;
            host.wasting_since = now;
        }
    }
}

/// Builds and runs `scenario` with the protocol it names (the registry's
/// [`crate::protocols::run`]).
pub fn run_scenario(
    scenario: &Scenario,
    progress: Option<Progress<'_>>,
) -> Result<RunReport, SimError> {
    crate::protocols::run(scenario, progress)
}
