//! Per-host link rates: a host whose NIC and switch port run at another
//! rate than the testbed's `rate_mbit` (a heterogeneous cluster, as in the
//! ByteDance paper's "heterogeneous networks").
//!
//! `up` builds every link at the spec's rate; [`set_host_rate`] then
//! changes host `i`'s two shapers in place: the HTB root class `1:1` of its
//! NIC (`eth0` in `h<i>`) and of its switch port (`p<i>` in the switch),
//! and the `ceil` of the port's priority leaves, with buckets sized for
//! the new rate as `up` sizes them ([`crate::tc::htb_burst_bytes`]).

use crate::netns::{command_in, run, TestbedSpec};
use crate::tc;
use anyhow::{bail, Context, Result};

fn args(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// `tc` arguments that set host `host`'s links to `rate_mbit`: first those
/// run in the host's namespace (its NIC), then those run in the switch's
/// (its port).
pub fn host_rate_commands(
    spec: &TestbedSpec,
    host: usize,
    rate_mbit: u64,
) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let at_rate = TestbedSpec {
        rate_mbit,
        ..spec.clone()
    };
    let rate = format!("{rate_mbit}mbit");
    let burst = tc::htb_burst_bytes(&at_rate).to_string();
    let quantum = tc::quantum_bytes(&at_rate).to_string();
    let root = |dev: &str| {
        args(&[
            "class", "change", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", &rate,
            "ceil", &rate, "burst", &burst, "cburst", &burst, "quantum", &quantum,
        ])
    };
    let nic = vec![root("eth0")];
    let dev = format!("p{host}");
    let mut port = vec![root(&dev)];
    for p in 0..spec.switch_levels.clamp(1, tc::PRIORITIES) {
        let htb_prio = (tc::PRIORITIES - 1 - p).to_string();
        port.push(args(&[
            "class",
            "change",
            "dev",
            &dev,
            "parent",
            "1:1",
            "classid",
            &tc::class_id(p),
            "htb",
            "rate",
            tc::LEAF_RATE,
            "ceil",
            &rate,
            "burst",
            "1",
            "cburst",
            &burst,
            "prio",
            &htb_prio,
            "quantum",
            &quantum,
        ]));
    }
    (nic, port)
}

/// Sets host `host`'s NIC and switch port (both directions of its link)
/// to `rate_mbit` on the running testbed `spec`.
pub fn set_host_rate(spec: &TestbedSpec, host: usize, rate_mbit: u64) -> Result<()> {
    if host >= spec.hosts {
        bail!("host {host} is not on the testbed ({} hosts)", spec.hosts);
    }
    crate::netns::validate_link(rate_mbit, spec.mtu)?;
    let (nic, port) = host_rate_commands(spec, host, rate_mbit);
    for a in nic {
        run(&mut command_in(&spec.host_ns(host), "tc", &a))
            .with_context(|| format!("setting host {host}'s NIC rate"))?;
    }
    for a in port {
        run(&mut command_in(&spec.switch_ns(), "tc", &a))
            .with_context(|| format!("setting switch port p{host}'s rate"))?;
    }
    Ok(())
}

/// Parses `HOST=MBIT,...` (e.g. `2=100,3=100`).
pub fn parse_host_rates(text: &str) -> Result<Vec<(usize, u64)>> {
    let mut out = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let Some((h, r)) = part.split_once('=') else {
            bail!("host rate {part:?}: expected HOST=MBIT");
        };
        let h: usize = h
            .trim()
            .parse()
            .with_context(|| format!("host rate {part:?}: bad host index"))?;
        let r: u64 = r
            .trim()
            .parse()
            .with_context(|| format!("host rate {part:?}: bad rate"))?;
        out.push((h, r));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_change_both_shapers_at_the_new_rate() {
        let spec = TestbedSpec::default();
        let (nic, port) = host_rate_commands(&spec, 2, 100);
        assert_eq!(nic.len(), 1);
        assert!(nic[0].contains(&"eth0".to_string()));
        assert!(nic[0].contains(&"100mbit".to_string()));
        // Root plus one leaf per priority, all on p2, none at the old rate.
        assert_eq!(port.len(), 1 + tc::PRIORITIES as usize);
        let old = format!("{}mbit", spec.rate_mbit);
        for c in nic.iter().chain(&port) {
            assert!(!c.contains(&old), "{c:?}");
        }
        for c in &port {
            assert!(c.contains(&"p2".to_string()));
            assert_eq!(c[0..2], ["class".to_string(), "change".into()]);
        }
        let burst = tc::htb_burst_bytes(&TestbedSpec {
            rate_mbit: 100,
            ..spec
        });
        assert!(port[0].contains(&burst.to_string()));
    }

    #[test]
    fn host_rates_parse() {
        assert_eq!(
            parse_host_rates("1=100, 2=400").unwrap(),
            vec![(1, 100), (2, 400)]
        );
        assert!(parse_host_rates("1").is_err());
        assert!(parse_host_rates("x=1").is_err());
    }
}
