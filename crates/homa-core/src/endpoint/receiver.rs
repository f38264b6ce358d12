//! The receiving side of an endpoint: memory held for incoming messages,
//! the grant budget, unscheduled cutoffs, partly received requests, and the
//! [`ReceiverPolicy`] that decides grants.

use crate::config::RPC_MEMORY_CHARGE;
use crate::incoming::InMessage;
use crate::metrics::Metrics;
use crate::policy::{GrantContext, GrantDecision, GrantKind, InView, ReceiverPolicy};
use crate::priority::{PriorityPlan, SizeSampler};
use crate::rpc::{Phase, Rpc};
use crate::{incast, Config, Nanos, RpcId};
use std::collections::BTreeSet;
use tracing::debug;

/// Receiver state of one endpoint.
#[derive(Debug)]
pub(super) struct Receiver {
    /// Decides grants.
    pub policy: Box<dyn ReceiverPolicy>,
    plan: PriorityPlan,
    plan_version: u16,
    sampler: SizeSampler,
    /// `sampler.recorded()` at the last cutoff recomputation.
    sampled_at_update: u64,
    /// When the cutoffs are next recomputed, if a timer is filed.
    pub cutoffs_timer: Option<Nanos>,
    /// When the policy asked to decide again, if a timer is filed.
    pub policy_timer: Option<Nanos>,
    /// Granted-but-unreceived bytes over all incoming messages.
    pub outstanding: u64,
    /// Bytes held for incoming messages (received bytes plus a fixed charge
    /// per message), bounded by `rx_buffer_limit`.
    pub buffered: u64,
    /// Partly received requests by last progress (ns): the first is the one
    /// to evict when the RPC table is full.
    embryos: BTreeSet<(Nanos, RpcId)>,
    /// Unscheduled bytes this receiver accepts of a message, at most.
    unsched_allowance: u32,
    /// ByteDance mode: unscheduled bytes accepted of a message whose sender
    /// sets the ByteDance DATA flag (`bytedance.max_unsched_bytes` in
    /// whole packets); `None` when the mode is off.
    bytedance_allowance: Option<u32>,
    /// DATA bytes (Homa header and payload) received in tick `rx_tick`.
    rx_tick_bytes: u64,
    rx_tick: u64,
    /// The latest tick whose DATA filled 3/4 of the link.
    busy_tick: Option<u64>,
    /// 3/4 of what the link carries in a tick (bytes); 0 = unknown link.
    busy_bytes: u64,
    /// (tick, requests from unproven peers admitted in it while the driver
    /// was backlogged); see `Config::backlog_unproven_per_tick`.
    pub unproven_admitted: (u64, u32),
}

impl Receiver {
    pub fn new(config: &Config, policy: Box<dyn ReceiverPolicy>) -> Receiver {
        Receiver {
            policy,
            plan: PriorityPlan::default_for(config.num_priorities),
            plan_version: 1,
            sampler: SizeSampler::new(config.cutoff_sample_size as usize),
            sampled_at_update: 0,
            cutoffs_timer: None,
            policy_timer: None,
            outstanding: 0,
            buffered: 0,
            embryos: BTreeSet::new(),
            unsched_allowance: incast::unsched_limit(config, u32::MAX, false),
            bytedance_allowance: config.bytedance.enabled.then(|| {
                crate::bytedance::window::round_up(
                    config.bytedance.max_unsched_bytes,
                    config.max_payload().max(1),
                )
            }),
            rx_tick_bytes: 0,
            rx_tick: 0,
            busy_tick: None,
            busy_bytes: config.link_mbps * config.tick_ns / 8_000 * 3 / 4,
            unproven_admitted: (0, 0),
        }
    }

    /// Counts a DATA packet of `bytes` (header included) received in `tick`.
    pub fn count_data(&mut self, tick: u64, bytes: usize) {
        if tick != self.rx_tick {
            self.rx_tick = tick;
            self.rx_tick_bytes = 0;
        }
        self.rx_tick_bytes += bytes as u64;
        if self.busy_bytes > 0 && self.rx_tick_bytes >= self.busy_bytes {
            self.busy_tick = Some(tick);
        }
    }

    /// The start (ns) of the latest tick in which the downlink carried DATA
    /// worth 3/4 of its capacity, if that is later than `since`.
    pub fn busy_since(&self, since: Nanos, tick_ns: u64) -> Option<Nanos> {
        self.busy_tick
            .map(|b| b * tick_ns)
            .filter(|&start| start > since)
    }

    pub fn cutoffs(&self) -> (PriorityPlan, u16) {
        (self.plan, self.plan_version)
    }

    pub fn plan_version(&self) -> u16 {
        self.plan_version
    }

    /// What a sender may send of a `length`-byte message before any grant:
    /// what it claims (`incoming`), but never more than the policy's
    /// unscheduled allowance (in ByteDance mode, the mode's larger one for
    /// a sender whose DATA `flags` carry the ByteDance bit: its per-peer
    /// window may reach `bytedance.max_unsched_bytes`).
    pub fn initial_grant(&self, length: u32, claimed: u32, flags: u8) -> u32 {
        // 0 is no claim: HomaModule's upstream build has no grants and
        // leaves the field (its `reserved1`) zero, and a message with bytes
        // never announces 0 otherwise (a Homa sender claims at least its
        // first packet; a SIRD sender that waits for credit is allowed 0
        // anyway). The allowance bounds what is believed, as for any claim.
        let claimed = if claimed == 0 { u32::MAX } else { claimed };
        let mut allowance = self.policy.unscheduled_allowance(length);
        if flags & homa_wire::DATA_FLAG_BYTEDANCE != 0 {
            if let Some(a) = self.bytedance_allowance {
                allowance = allowance.max(a);
            }
        }
        claimed.min(allowance).min(length)
    }

    /// Records the size of a new incoming message (the sampler takes it
    /// in at [`Receiver::settle`] at the latest).
    pub fn record_size(&mut self, length: u32) {
        self.sampler.record(length);
    }

    /// Takes in the message size recorded last (see
    /// [`crate::priority::SizeSampler::settle`]).
    pub fn settle(&mut self) {
        self.sampler.settle();
    }

    /// True while a recorded size waits for [`Receiver::settle`].
    pub fn unsettled(&self) -> bool {
        self.sampler.unsettled()
    }

    /// Recomputes the cutoffs from the sizes seen (the measurement interval
    /// has passed). Returns true if they changed. `ratio`: in ByteDance
    /// mode, the measured unscheduled ratio (‰), which then decides the
    /// number of unscheduled levels (see [`Receiver::ratio_plan`]); `None`:
    /// Homa's rule from the sampled sizes alone.
    pub fn update_cutoffs(&mut self, config: &Config, ratio: Option<u16>) -> bool {
        if self.sampler.recorded() == self.sampled_at_update {
            // The same sizes (and, as both count the same new messages,
            // the same ratio) as last time.
            return false;
        }
        let new = match ratio {
            Some(r) => self.ratio_plan(config, r),
            None => {
                if self.sampler.sizes().len() < config.cutoff_min_samples as usize {
                    return false;
                }
                PriorityPlan::from_sorted_sizes(
                    self.sampler.sorted(),
                    self.unsched_allowance,
                    config.num_priorities,
                )
            }
        };
        self.sampled_at_update = self.sampler.recorded();
        if !new.differs_significantly(&self.plan) {
            return false;
        }
        self.plan = new;
        self.plan_version = self.plan_version.wrapping_add(1).max(1);
        debug!(cutoffs = ?new.cutoffs, sched_levels = new.sched_levels, "new unscheduled cutoffs");
        true
    }

    /// ByteDance mode's plan: as many unscheduled levels as the measured
    /// ratio `ratio`‰ gives (with `bytedance.split_hysteresis` around the
    /// current count), cut for equal unscheduled bytes per level from the
    /// sampled sizes once there are `cutoff_min_samples` of them, else at
    /// Linux's default boundaries.
    fn ratio_plan(&mut self, config: &Config, ratio: u16) -> PriorityPlan {
        let p = config.num_priorities;
        let levels = crate::priority::unsched_levels_from_ratio(
            ratio,
            p,
            self.plan.unsched_levels(p),
            config.bytedance.split_hysteresis,
        );
        let sizes: &[u32] = if self.sampler.sizes().len() >= config.cutoff_min_samples as usize {
            self.sampler.sorted()
        } else {
            &[]
        };
        PriorityPlan::from_sorted_sizes_with_levels(sizes, self.unsched_allowance, p, levels)
    }

    /// See [`super::Endpoint::prime_size_sample`].
    pub fn prime_sizes(&mut self, config: &Config, sizes: &[u32]) -> bool {
        for &s in sizes {
            self.sampler.record(s);
        }
        if sizes.is_empty() {
            return false;
        }
        let new = PriorityPlan::from_sorted_sizes(
            self.sampler.sorted(),
            self.unsched_allowance,
            config.num_priorities,
        );
        if new == self.plan {
            return false;
        }
        self.plan = new;
        self.plan_version = self.plan_version.wrapping_add(1).max(1);
        true
    }

    /// Files the RPC's incoming message with the policy, and a partly
    /// received request in the eviction order.
    /// `grant_window`: the per-peer window the endpoint sets, if any
    /// ([`InView::grant_window`]).
    pub fn refile(&mut self, now: Nanos, id: RpcId, rpc: &mut Rpc, grant_window: Option<u32>) {
        match rpc.phase.msgin() {
            Some(m) if !m.is_complete() => {
                self.policy.update(
                    now,
                    &InView {
                        id,
                        length: m.length,
                        received: m.received,
                        granted: m.granted,
                        seq: m.seq,
                        grant_window,
                    },
                );
                rpc.in_grant_policy = true;
            }
            // (The policy knows nothing of an RPC it was never told of:
            // no lookup for every packet of an outgoing message.)
            _ if std::mem::take(&mut rpc.in_grant_policy) => self.policy.remove(id),
            _ => {}
        }
        // A partly received request is filed once, under the time it was
        // last heard from; that key only grows, and is brought up to date
        // when eviction looks at it (`Endpoint::stalest_embryo`), not on
        // every packet.
        let receiving = matches!(rpc.phase, Phase::Receiving { .. });
        match (receiving, rpc.embryo) {
            (true, None) => {
                self.embryos.insert((rpc.last_heard, id));
                rpc.embryo = Some(rpc.last_heard);
            }
            (false, Some(k)) => {
                self.embryos.remove(&(k, id));
                rpc.embryo = None;
            }
            _ => {}
        }
    }

    /// Takes the RPC out of everything here and releases its message's
    /// memory and budget.
    pub fn forget(&mut self, id: RpcId, rpc: &mut Rpc) {
        if std::mem::take(&mut rpc.in_grant_policy) {
            self.policy.remove(id);
        }
        if let Some(k) = rpc.embryo.take() {
            self.embryos.remove(&(k, id));
        }
        if let Some(m) = rpc.phase.msgin() {
            self.release(m);
        }
    }

    /// Starts reassembling a new message whose first packet carries `h`:
    /// the bytes its sender may send before any GRANT
    /// ([`Receiver::initial_grant`]), and the memory and grant budget the
    /// message holds until [`Receiver::release`]. Returns the message and
    /// that initial grant. (The caller checks `rx_buffer_limit` first.)
    pub fn admit(&mut self, h: &homa_wire::DataHeader, seq: u64) -> (InMessage, u32) {
        let granted = self.initial_grant(h.message_length, h.incoming, h.flags);
        self.buffered += RPC_MEMORY_CHARGE;
        self.outstanding += granted as u64;
        (InMessage::new(h.message_length, granted, seq), granted)
    }

    /// Releases a message's memory and budget (it is complete or dropped).
    pub fn release(&mut self, m: &InMessage) {
        self.outstanding -= m.outstanding() as u64;
        self.buffered -= m.received as u64 + RPC_MEMORY_CHARGE;
    }

    /// The partly received request that made no progress for longest.
    /// (By filed key, which may be older than the RPC's `last_heard`.)
    pub fn stalest_embryo(&self) -> Option<(Nanos, RpcId)> {
        self.embryos.first().copied()
    }

    /// Moves a partly received request from key `old` to `new`.
    pub fn rekey_embryo(&mut self, id: RpcId, old: Nanos, new: Nanos) {
        self.embryos.remove(&(old, id));
        self.embryos.insert((new, id));
    }

    pub fn embryos(&self) -> usize {
        self.embryos.len()
    }

    /// Grants the policy decides on now.
    pub fn schedule(&mut self, now: Nanos) -> Vec<GrantDecision> {
        if !self.policy.has_candidates() {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(8);
        let ctx = GrantContext {
            outstanding: self.outstanding,
            sched_levels: self.plan.sched_levels,
        };
        self.policy.schedule(now, &ctx, &mut out);
        out
    }

    /// Whether a grant decision now would change nothing: no message needs
    /// grants ([`Receiver::schedule`] then decides none, without asking
    /// the policy) and the policy's wake-up time is the one filed.
    #[inline]
    pub fn decision_is_idle(&self) -> bool {
        !self.policy.has_candidates() && self.policy.wakeup() == self.policy_timer
    }

    /// Raises `m`'s grant as decided.
    pub fn apply_grant(&mut self, m: &mut InMessage, g: &GrantDecision, metrics: &mut Metrics) {
        let before = m.outstanding();
        m.granted = m.granted.max(g.offset.min(m.length));
        m.priority = g.priority;
        self.outstanding = self.outstanding + m.outstanding() as u64 - before as u64;
        match g.kind {
            GrantKind::Scheduled => metrics.grants_srpt += 1,
            GrantKind::Fifo => metrics.grants_fifo += 1,
        }
    }
}
