//! The network's side of a run: host NICs fed from the transports,
//! packets admitted to egress ports, forwarded hop by hop (ECMP or
//! per-packet spraying over the spines) and handed to the destination's
//! transport.

use super::*;

impl<P: Protocol + Clone> Simulation<P> {
    pub(super) fn fill_nic(&mut self, now: Time, h: HostId) {
        let pi = self.topo.host_nic(h);
        loop {
            let port = &self.ports[pi];
            let outstanding = port.queued_bytes() + port.on_wire.map_or(0, |q| q.bytes as u64);
            if outstanding + self.max_frame > self.nic_limit.max(self.max_frame) && outstanding > 0
            {
                break;
            }
            let Some(pkt) = self.hosts[h as usize].transport.poll_transmit(now) else {
                break;
            };
            let q = Queued {
                idx: 0,
                bytes: pkt.meta.wire_bytes,
                priority: pkt.meta.priority,
                rank: pkt.meta.rank,
                dst: pkt.meta.dst,
            };
            let idx = self.packets.insert(pkt);
            self.admit(now, pi, Queued { idx, ..q });
        }
    }

    pub(super) fn admit(&mut self, now: Time, pi: usize, q: Queued) {
        let port = &mut self.ports[pi];
        let before = port.queued_bytes();
        match port.admit(now, q) {
            Admit::Queued { ecn } => {
                if ecn && !background::is_background(q.idx) {
                    self.packets.get_mut(q.idx).meta.ecn = true;
                }
            }
            Admit::Dropped => {
                if background::is_background(q.idx) {
                    self.background.total.dropped_frames += 1;
                } else {
                    self.packets.remove(q.idx);
                }
            }
        }
        for d in port.take_dropped() {
            if background::is_background(d) {
                self.background.total.dropped_frames += 1;
            } else {
                self.packets.remove(d);
            }
        }
        let after = port.queued_bytes();
        self.switches.port_changed(now, pi, before, after);
        self.start_port(now, pi);
    }

    pub(super) fn start_port(&mut self, now: Time, pi: usize) {
        let port = &mut self.ports[pi];
        let before = port.queued_bytes();
        if let Some(q) = port.start_next(now) {
            let after = port.queued_bytes();
            self.switches.port_changed(now, pi, before, after);
            let port = &mut self.ports[pi];
            let done = now + tx_time(q.bytes, port.bps);
            self.events.schedule(done, Ev::TxDone(pi as u32));
            if port.kind == PortKind::TorDown {
                let h = pi as u32 - self.topo.hosts;
                self.update_waste(now, h);
            }
        }
    }

    pub(super) fn enqueue(&mut self, now: Time, port: u32, pkt: u32) {
        let m = self.packets.get(pkt).meta;
        let q = Queued {
            idx: pkt,
            bytes: m.wire_bytes,
            priority: m.priority,
            rank: m.rank,
            dst: m.dst,
        };
        self.admit(now, port as usize, q);
    }

    pub(super) fn tx_done(&mut self, now: Time, pi: u32) {
        let pi = pi as usize;
        let Some(q) = self.ports[pi].finish(now) else {
            return;
        };
        let at = now + self.hop_delay[pi];
        let dst = q.dst;
        let kind = self.ports[pi].kind;
        match self.ports[pi].next {
            // Background frames end at the host's NIC.
            Next::Host(_) if background::is_background(q.idx) => {
                self.background.total.delivered_frames += 1;
            }
            Next::Host(h) => self.events.schedule(
                at,
                Ev::Deliver {
                    host: h,
                    pkt: q.idx,
                },
            ),
            Next::Tor(r) => {
                let out = if self.topo.rack_of(dst) == r {
                    self.topo.tor_down(dst)
                } else {
                    let spines = self.topo.config.spines;
                    let s = match self.topo.config.uplink_selection {
                        UplinkSelection::Spray => self.spray_rng.gen_range(0..spines),
                        UplinkSelection::Hash => {
                            let f = self.packets.get(q.idx).meta.flow;
                            (mix(f ^ r as u64) % spines as u64) as u32
                        }
                    };
                    self.topo.tor_up(r, s)
                };
                self.events.schedule(
                    at,
                    Ev::Enqueue {
                        port: out as u32,
                        pkt: q.idx,
                    },
                );
            }
            Next::Spine(s) => {
                let out = self.topo.spine_down(s, self.topo.rack_of(dst));
                self.events.schedule(
                    at,
                    Ev::Enqueue {
                        port: out as u32,
                        pkt: q.idx,
                    },
                );
            }
        }
        self.start_port(now, pi);
        match kind {
            PortKind::HostNic => {
                let h = pi as u32;
                self.fill_nic(now, h);
                // The transport may have sent; its timer and waste state
                // are unchanged by a send, so no full service is needed.
            }
            PortKind::TorDown => {
                let h = pi as u32 - self.topo.hosts;
                self.update_waste(now, h);
            }
            _ => {}
        }
    }
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}
