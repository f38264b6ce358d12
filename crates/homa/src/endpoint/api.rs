//! The blocking API of [`Endpoint`]: binding, calls and requests, replies,
//! aborts, counters and readiness (the machinery behind it is the
//! parent module's and its siblings').

use super::*;

impl Endpoint {
    /// Opens an endpoint on `addr`. Port 0 picks a client port. The IP
    /// family of `addr` is the family of every peer.
    pub fn bind(addr: SocketAddr, config: Config) -> Result<Endpoint, Error> {
        config.check()?;
        let group = GroupSpec {
            transport: config.transport,
            buffer_bytes: config.socket_buffer_bytes,
            gso: config.segmentation_offload,
            // GRO holds packets back in the kernel for a moment; with busy
            // polling that costs more than it saves.
            gro: config.receive_offload && !config.busy_poll,
            // SIRD's receiver reacts to ECN marks; Homa does not use them
            // (and its packets stay as they were).
            ecn: config.core.design == homa_core::Design::Sird,
            default_priority: Some(config.core.num_priorities.saturating_sub(1)),
            lanes: config.lanes,
        };
        let (mut sock, local) = crate::socket::open_group(addr, &group)?;
        if let Some(peer) = config.peer {
            sock.connect(peer)?;
        }
        let lane_count = if group.has_lanes() { config.lanes } else { 0 };
        let mut config = config;
        // (Also fills in the ByteDance mode's GSO/GRO batch sizes from the
        // offload settings, and refuses the mode without a link rate.)
        config.core = config.effective_core(sock.lower_header_bytes())?;
        let seed = rand::random::<u64>();
        let mut core = homa_core::Endpoint::new(config.core.clone(), local, seed)
            .map_err(|e| Error::Config(e.to_string()))?;
        let lane_taken = Arc::new(AtomicU64::new(0));
        let lane_state = LaneState::new(lane_count, lane_taken.clone());
        // Ids of RPCs not in a lane of their own are in lane 0.
        core.set_id_tag(lane_state.tag(0));
        let pacer = (config.core.link_mbps > 0).then(|| {
            Pacer::new(
                config.core.link_mbps,
                config.max_nic_queue_ns,
                config.pacer_bypass_bytes,
            )
        });
        if let Some(f) = &config.fault_injection {
            f.validate()?;
        }
        let faults = config.fault_injection.as_ref().map(Faults::new);
        let inner = Arc::new(Inner {
            kick: Kick::new()?,
            recv_bufs: parking_lot::Mutex::new(RecvBufs::new(config.recv_batch)),
            group,
            lanes: std::sync::OnceLock::new(),
            lane_taken,
            send_queue: parking_lot::Mutex::new(SendQueue::default()),
            sock,
            local,
            epoch: Instant::now(),
            epoch_ns: monotonic_ns(),
            last_now: AtomicU64::new(0),
            state: parking_lot::Mutex::new(State {
                core,
                pacer,
                held: None,
                clients: clients::Clients::default(),
                requests: VecDeque::new(),
                async_requests: VecDeque::new(),
                reader: Reader::Nobody,
                reader_free_at: 0,
                recv_blocked: false,
                recv_blocked_until: None,
                bg_wakes_at: None,
                generation: 0,
                parked: Parked::default(),
                faults,
                streams: crate::stream::Streams::default(),
                lanes: lane_state,
            }),
            stats: Stats::default(),
            config,
            waiters: AtomicUsize::new(0),
            cpu: crate::contention::CpuContention::shared(),
            bg_cond: Condvar::new(),
            closed: AtomicBool::new(false),
            background: Mutex::new(None),
            ready: Readiness::new(),
        });
        let bg = inner.clone();
        let handle = std::thread::Builder::new()
            .name(format!("homa-{}", local.port()))
            .spawn(move || bg.background())?;
        *inner.background.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
        watch::watch(&inner);
        Ok(Endpoint {
            _owner: Arc::new(Owner(inner.clone())),
            inner,
        })
    }

    /// The bound address and port.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Sends `request` to `dest` and waits up to `timeout` for the response.
    /// On timeout the RPC is aborted. With [`Config::lanes`] the thread
    /// waits in a lane of its own while one is free (`RuntimeStats::
    /// lane_calls`), else as [`Endpoint::recv_response`] does. A response
    /// of several packets is copied into one buffer; [`Endpoint::call_parts`]
    /// saves that copy.
    pub fn call(
        &self,
        dest: SocketAddr,
        request: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, Error> {
        self.call_parts(dest, request, timeout)
            .map(Message::into_bytes)
    }

    /// Like [`Endpoint::call`], but the response stays in the packets it
    /// came in ([`Message::parts`], or [`Message::reader`] as a
    /// `bytes::Buf`): no copy into one buffer, which for a large response
    /// is a copy of every byte (see [`Endpoint::recv_request_parts`]).
    pub fn call_parts(
        &self,
        dest: SocketAddr,
        request: Bytes,
        timeout: Duration,
    ) -> Result<Message, Error> {
        if self.inner.group.has_lanes() {
            if let Some(r) = self.inner.call_in_lane(dest, &request, timeout) {
                return r;
            }
        }
        let id = self.send_request(dest, request)?;
        match self.recv_response_parts(id, Some(timeout)) {
            Err(Error::Timeout) => {
                let _ = self.abort(id);
                Err(Error::Timeout)
            }
            r => r,
        }
    }

    /// Starts an RPC; collect its response with [`Endpoint::recv_response`]
    /// or [`Endpoint::recv_any_response`].
    pub fn send_request(&self, dest: SocketAddr, request: Bytes) -> Result<RpcId, Error> {
        let mut out = Output::new();
        let (id, st, send) = self.inner.start_request(dest, request, &mut out)?;
        drop(st);
        self.inner.send_queued(send, &out);
        Ok(id)
    }

    /// Waits for the response of `id` (at most `timeout`, or for ever).
    pub fn recv_response(&self, id: RpcId, timeout: Option<Duration>) -> Result<Bytes, Error> {
        self.recv_response_parts(id, timeout)
            .map(Message::into_bytes)
    }

    /// Waits for whichever outstanding RPC finishes first; returns its id
    /// and its outcome.
    pub fn recv_any_response(
        &self,
        timeout: Option<Duration>,
    ) -> Result<(RpcId, Result<Bytes, Error>), Error> {
        let (id, outcome) = self.recv_any_response_parts(timeout)?;
        Ok((id, outcome.map(Message::into_bytes)))
    }

    /// Like [`Endpoint::recv_any_response`], but the response stays in the
    /// packets it came in (see [`Endpoint::recv_request_parts`]).
    pub fn recv_any_response_parts(
        &self,
        timeout: Option<Duration>,
    ) -> Result<(RpcId, Result<Message, Error>), Error> {
        let clock = Instant::now();
        let deadline = timeout.map(|t| clock + t);
        self.inner
            .wait_until_with(WaitFor::AnyResponse, deadline, Some(clock), None, |st| {
                st.clients.take_any()
            })
    }

    /// Like [`Endpoint::recv_request`], but the request stays in the
    /// packets it came in ([`Message::parts`], or [`Message::reader`] as a
    /// `bytes::Buf`): no copy into one buffer, which for large messages is
    /// a copy of every byte (what Linux Homa's buffer pool saves too).
    pub fn recv_request_parts(&self, timeout: Option<Duration>) -> Result<(RpcId, Message), Error> {
        let clock = Instant::now();
        let deadline = timeout.map(|t| clock + t);
        self.inner
            .wait_until_with(WaitFor::Request, deadline, Some(clock), None, |st| {
                st.requests.pop_front().map(Ok)
            })
            .map(|q| (q.id, q.message))
    }

    /// Like [`Endpoint::recv_response`], but the response stays in the
    /// packets it came in (see [`Endpoint::recv_request_parts`]).
    pub fn recv_response_parts(
        &self,
        id: RpcId,
        timeout: Option<Duration>,
    ) -> Result<Message, Error> {
        let clock = Instant::now();
        let deadline = timeout.map(|t| clock + t);
        self.inner.wait_response(id, deadline, clock)
    }

    /// Waits for the next request (at most `timeout`, or for ever).
    pub fn recv_request(&self, timeout: Option<Duration>) -> Result<Request, Error> {
        self.recv_request_parts(timeout)
            .map(|(id, message)| Queued { id, message }.into_request())
    }

    /// Sends the response to a request.
    pub fn reply(&self, id: RpcId, response: Bytes) -> Result<(), Error> {
        self.inner.check_open()?;
        let inner = &self.inner;
        let mut st = inner.lock();
        // Again under the lock: a shutdown in between ended the RPC, and the
        // caller should hear `Closed`, not that the RPC is unknown.
        inner.check_open()?;
        let now = inner.now();
        st.core.reply(now, id, response)?;
        let mut out = Output::new();
        inner.take_output(&mut st, now, &mut out);
        inner.wake_reader_for_pacer(&st);
        let send = inner.queue_out(&mut out);
        drop(st);
        inner.send_queued(send, &out);
        Ok(())
    }

    /// Gives back a request taken with [`Endpoint::recv_request`] (or
    /// [`crate::AsyncEndpoint::recv_request`]) that will not be handled
    /// after all: the next receiver, blocking or async, gets it before any
    /// request that came later. For a caller that was cancelled just as the
    /// request arrived (the async API and the Python bindings use it). The
    /// RPC itself is untouched: it still awaits its reply.
    pub fn requeue_request(&self, request: Request) {
        self.inner.requeue_request(request.into());
    }

    /// A snapshot of an RPC's protocol state (see
    /// [`homa_core::Endpoint::rpc_snapshot`]; it displays as one line), for
    /// diagnostics.
    pub fn rpc_snapshot(&self, id: RpcId) -> Option<homa_core::RpcSnapshot> {
        self.inner.lock().core.rpc_snapshot(id)
    }

    /// Abandons an RPC: a client RPC is forgotten (its response, if it comes,
    /// is dropped); a server RPC is dropped without a reply.
    pub fn abort(&self, id: RpcId) -> Result<(), Error> {
        let (r, was_done) = self.inner.abort_rpc(id);
        match r {
            Ok(()) => Ok(()),
            Err(_) if was_done => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The protocol's counters and gauges.
    pub fn metrics(&self) -> Metrics {
        self.inner.lock().core.metrics()
    }

    /// What the ByteDance mode knows of `peer` (its RTTs, link rate,
    /// windows), if the mode is on and the peer is known; for experiments
    /// that compare the detected bandwidth-delay product with the true one.
    pub fn bytedance_peer(&self, peer: SocketAddr) -> Option<homa_core::bytedance::PeerState> {
        self.inner.lock().core.bytedance_peer(peer)
    }

    /// What the ByteDance mode knows of every peer the endpoint keeps
    /// state for, in address order (see [`Endpoint::bytedance_peer`]).
    pub fn bytedance_peers(&self) -> Vec<(SocketAddr, homa_core::bytedance::PeerState)> {
        self.inner.lock().core.bytedance_peers()
    }

    /// The runtime's own counters.
    pub fn runtime_stats(&self) -> RuntimeStats {
        self.inner.stats.snapshot()
    }

    /// A descriptor for `epoll`/`poll`/`select`, readable while a message
    /// waits to be collected (a request for [`Endpoint::recv_request`], or
    /// the outcome of a client RPC for [`Endpoint::recv_response`] /
    /// [`Endpoint::recv_any_response`]) and once the endpoint is shut down.
    /// Level-triggered; it may be readable for a moment after another
    /// thread has started to take the last message, so collect with a zero
    /// timeout and expect [`Error::Timeout`] now and then.
    ///
    /// Created on the first call (until then it costs nothing). The
    /// endpoint owns it: it stays open until the last clone is dropped;
    /// only poll it, never read, write or close it.
    pub fn ready_fd(&self) -> Result<BorrowedFd<'_>, Error> {
        let st = self.inner.lock();
        Ok(self.inner.ready.fd(self.inner.has_ready(&st))?)
    }

    /// Closes the endpoint: waiting calls return [`Error::Closed`], the
    /// background thread stops, and RPCs in progress are abandoned. Before
    /// the socket closes, the ACKs this endpoint owes its servers go out
    /// (finished RPCs, and abandoned ones, which servers may then free; see
    /// [`homa_core::Endpoint::close`]), for at most 100 ms: otherwise a Linux
    /// server would ask for them with a NEED_ACK every millisecond for as
    /// long as it runs. Packets already due (one the pacer held back, the
    /// rest of a reply's unscheduled bytes) go out first. Streams end at
    /// once: what the peer has not acknowledged yet, an end after
    /// [`Stream::finish`](crate::Stream::finish) included, may be lost;
    /// wait for [`Stream::wait_closed`](crate::Stream::wait_closed) first.
    /// The same happens when the last handle is dropped.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }
}
