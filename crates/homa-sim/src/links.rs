//! Heterogeneous host links: some hosts' links get extra propagation delay
//! and/or a different rate (`[[topology.host_links]]`), so that different
//! peers have different RTTs and bandwidth-delay products.
//!
//! ```toml
//! [[topology.host_links]]
//! hosts = "0-7,20"        # host ids: ranges and single ids
//! extra_delay_ns = 5000   # added to each direction of the host's link
//! gbps = 25.0             # the host link's rate (both directions)
//! ```
//!
//! A host's link is its NIC → ToR link and the ToR → host downlink; the
//! extra delay is propagation on each of them, so every round trip through
//! that host grows by `2 × extra_delay_ns`. Later entries win for a host
//! named twice. RTTbytes, which stock Homa uses for every peer, stays that
//! of the scenario's nominal links ([`crate::topology::Topology::rtt`]).

use crate::transport::HostId;
use serde::{Deserialize, Serialize};

/// One override of host links.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostLinkOverride {
    /// Which hosts: comma-separated ids and inclusive ranges ("0-7,20").
    pub hosts: String,
    /// Extra one-way propagation delay on each direction of the link (ns).
    #[serde(default)]
    pub extra_delay_ns: f64,
    /// Link rate (Gbit/s); `None` = the topology's `host_link_gbps`.
    #[serde(default)]
    pub gbps: Option<f64>,
}

/// Parses a host set ("0-7,20", spaces allowed) into sorted, distinct ids,
/// each below `hosts`.
pub fn parse_hosts(spec: &str, hosts: u32) -> Result<Vec<HostId>, String> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("bad host id {s:?} in {spec:?}"))
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if lo > hi {
            return Err(format!("empty range {part:?} in {spec:?}"));
        }
        if hi >= hosts {
            return Err(format!(
                "host {hi} in {spec:?} does not exist (there are {hosts})"
            ));
        }
        out.extend(lo..=hi);
    }
    if out.is_empty() {
        return Err(format!("no hosts in {spec:?}"));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Per-host link rate (bit/s) and extra delay (ns) after the overrides,
/// starting from `bps` and no extra delay for every one of `hosts`.
pub fn resolve(
    overrides: &[HostLinkOverride],
    hosts: u32,
    bps: u64,
) -> Result<Vec<(u64, f64)>, String> {
    let mut v = vec![(bps, 0.0); hosts as usize];
    for o in overrides {
        if !(o.extra_delay_ns.is_finite() && (0.0..=1e9).contains(&o.extra_delay_ns)) {
            return Err(format!(
                "host_links.extra_delay_ns must be in [0, 1e9], got {}",
                o.extra_delay_ns
            ));
        }
        if let Some(g) = o.gbps {
            if !(g.is_finite() && g > 0.0 && g <= 10_000.0) {
                return Err(format!("host_links.gbps must be in (0, 10000], got {g}"));
            }
        }
        for h in parse_hosts(&o.hosts, hosts)? {
            let e = &mut v[h as usize];
            if let Some(g) = o.gbps {
                e.0 = (g * 1e9).round() as u64;
            }
            e.1 = o.extra_delay_ns;
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_sets() {
        assert_eq!(parse_hosts("0-3, 7,2", 10).unwrap(), vec![0, 1, 2, 3, 7]);
        assert_eq!(parse_hosts("9", 10).unwrap(), vec![9]);
        assert!(parse_hosts("10", 10)
            .unwrap_err()
            .contains("does not exist"));
        assert!(parse_hosts("3-1", 10).is_err());
        assert!(parse_hosts("a", 10).is_err());
        assert!(parse_hosts("", 10).is_err());
        assert!(parse_hosts("-1", 10).is_err());
    }

    #[test]
    fn overrides_resolve_per_host_later_wins() {
        let o: Vec<HostLinkOverride> = toml::from_str::<toml::Table>(
            "[[l]]\nhosts = \"0-1\"\nextra_delay_ns = 5000\n\
             [[l]]\nhosts = \"1\"\nextra_delay_ns = 100\ngbps = 25.0\n",
        )
        .unwrap()["l"]
            .clone()
            .try_into()
            .unwrap();
        let v = resolve(&o, 3, 10_000_000_000).unwrap();
        assert_eq!(v[0], (10_000_000_000, 5000.0));
        assert_eq!(v[1], (25_000_000_000, 100.0));
        assert_eq!(v[2], (10_000_000_000, 0.0));
        let bad = HostLinkOverride {
            hosts: "0".into(),
            extra_delay_ns: -1.0,
            gbps: None,
        };
        assert!(resolve(&[bad], 3, 1).is_err());
        let bad = HostLinkOverride {
            hosts: "0".into(),
            extra_delay_ns: 0.0,
            gbps: Some(0.0),
        };
        assert!(resolve(&[bad], 3, 1).is_err());
    }
}
