//! Who does what in each experiment: the host roles.

/// What one host does in an experiment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    /// Host index.
    pub host: usize,
    /// Hosts it loads in closed loop (one RPC outstanding to each).
    pub targets: Vec<usize>,
    /// Request size of its clients (bytes).
    pub size: u64,
    /// Whether it records round-trip times (the prober).
    pub probe: bool,
}

/// The incast plan: host 0 receives, hosts `1..=senders` send `size`-byte
/// requests to it, host `senders + 1` probes it with 8-byte requests.
pub fn incast_plan(senders: usize, size: u64) -> Vec<Role> {
    let mut roles = vec![Role {
        host: 0,
        targets: vec![],
        size: 0,
        probe: false,
    }];
    for h in 1..=senders {
        roles.push(Role {
            host: h,
            targets: vec![0],
            size,
            probe: false,
        });
    }
    roles.push(Role {
        host: senders + 1,
        targets: vec![0],
        size: crate::sird_node::REPLY_BYTES as u64,
        probe: true,
    });
    roles
}

/// The congested-sender plan: host 0 sends `size`-byte requests to each
/// of hosts `1..=receivers`; host `receivers + r` sends `other_size`-byte
/// requests to host `r`.
pub fn congested_plan(receivers: usize, size: u64, other_size: u64) -> Vec<Role> {
    let mut roles = vec![Role {
        host: 0,
        targets: (1..=receivers).collect(),
        size,
        probe: false,
    }];
    for r in 1..=receivers {
        roles.push(Role {
            host: r,
            targets: vec![],
            size: 0,
            probe: false,
        });
    }
    for r in 1..=receivers {
        roles.push(Role {
            host: receivers + r,
            targets: vec![r],
            size: other_size,
            probe: false,
        });
    }
    roles
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incast_plan_has_six_senders_a_prober_and_a_receiver() {
        let p = incast_plan(6, 1_000_000);
        assert_eq!(p.len(), 8);
        assert!(p[0].targets.is_empty());
        for r in &p[1..7] {
            assert_eq!(
                (r.targets.as_slice(), r.size, r.probe),
                (&[0][..], 1_000_000, false)
            );
        }
        assert_eq!((p[7].host, p[7].size, p[7].probe), (7, 8, true));
        assert_eq!(p[7].targets, vec![0]);
    }

    #[test]
    fn congested_plan_pairs_each_receiver_with_one_sender() {
        let p = congested_plan(4, 1_000_000, 8_000_000);
        assert_eq!(p.len(), 9);
        assert_eq!(p[0].targets, vec![1, 2, 3, 4]);
        assert_eq!(p[0].size, 1_000_000);
        for r in 1..=4 {
            assert!(p[r].targets.is_empty());
            assert_eq!(p[4 + r].host, 4 + r);
            assert_eq!(p[4 + r].targets, vec![r]);
            assert_eq!(p[4 + r].size, 8_000_000);
        }
        // Every receiver is loaded by exactly two hosts.
        for r in 1..=4 {
            let n = p.iter().filter(|x| x.targets.contains(&r)).count();
            assert_eq!(n, 2);
        }
    }
}
