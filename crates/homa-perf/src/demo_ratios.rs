//! The ratios `homa-perf demo` tracks (Homa against TCP and UDP), from the
//! whole run and from each of its interleaved rounds: a ratio comes with
//! the lowest and highest value it took in a round, so that a reader sees
//! how far one figure of a noisy machine can be trusted.

use crate::demo::{DemoRow, MANY_CLIENTS};
use crate::stats::Report;
use serde::Serialize;

/// One tracked ratio.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    /// What is divided by what.
    pub name: String,
    /// The ratio over the whole run (every round's RPCs together); null
    /// when a side is missing.
    pub value: Option<f64>,
    /// The lowest of the ratios of single rounds (with at least two rounds
    /// that measured both sides).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub low: Option<f64>,
    /// The highest of the ratios of single rounds (as `low`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub high: Option<f64>,
}

impl Ratio {
    fn new(name: String, value: Option<f64>) -> Ratio {
        Ratio {
            name,
            value,
            low: None,
            high: None,
        }
    }
}

/// Sets each ratio's `low` and `high` from the same ratios computed over
/// single rounds (`per_round[r][i]` is ratio `i` of round `r`); a round
/// that misses a side does not count, and fewer than two rounds that count
/// leave both unset, as does a ratio the whole run has no value for (a
/// row that failed in a later round).
pub(crate) fn set_spread(ratios: &mut [Ratio], per_round: &[Vec<Ratio>]) {
    for (i, r) in ratios.iter_mut().enumerate() {
        if r.value.is_none() {
            continue;
        }
        let values: Vec<f64> = per_round
            .iter()
            .filter_map(|round| round.get(i).and_then(|x| x.value))
            .collect();
        if values.len() >= 2 {
            r.low = values.iter().copied().reduce(f64::min);
            r.high = values.iter().copied().reduce(f64::max);
        }
    }
}

fn find<'a>(
    rows: &'a [DemoRow],
    test: &str,
    protocol: &str,
    busy_poll: bool,
    no_poll: bool,
    concurrency: usize,
) -> Option<&'a Report> {
    find_row(rows, test, protocol, busy_poll, no_poll, false, concurrency)
}

fn find_row<'a>(
    rows: &'a [DemoRow],
    test: &str,
    protocol: &str,
    busy_poll: bool,
    no_poll: bool,
    pipelined: bool,
    concurrency: usize,
) -> Option<&'a Report> {
    rows.iter()
        .find(|r| {
            r.test == test
                && r.protocol == protocol
                && r.busy_poll == busy_poll
                && r.no_poll == no_poll
                && r.pipelined == pipelined
                && r.concurrency == concurrency
        })
        .and_then(|r| r.report.as_ref())
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some((a / b * 100.0).round() / 100.0),
        _ => None,
    }
}

pub(crate) fn ratios(rows: &[DemoRow]) -> Vec<Ratio> {
    let p50 = |proto, busy| find(rows, "latency", proto, busy, false, 1).and_then(|r| r.p50_us);
    let gbps = |proto, pipelined, k| {
        find_row(rows, "throughput", proto, false, false, pipelined, k)
            .filter(|r| r.rpcs > 0)
            .map(|r| r.gbps)
    };
    let mut out = Vec::new();
    for (busy, mode) in [(false, "blocking"), (true, "busy-poll")] {
        out.push(Ratio::new(
            format!("homa p50 / udp p50, {mode}"),
            ratio(p50("homa", busy), p50("udp", busy)),
        ));
    }
    out.push(Ratio::new(
        "homa (no-poll) p50 / udp p50, blocking".to_string(),
        ratio(
            find(rows, "latency", "homa", false, true, 1).and_then(|r| r.p50_us),
            p50("udp", false),
        ),
    ));
    for (busy, mode) in [(false, "blocking"), (true, "busy-poll")] {
        out.push(Ratio::new(
            format!("homa p50 / tcp p50, {mode}"),
            ratio(p50("homa", busy), p50("tcp", busy)),
        ));
    }
    out.push(Ratio::new(
        "homa Gbit/s / tcp Gbit/s, 500 KB, 1 outstanding".to_string(),
        ratio(gbps("homa", false, 1), gbps("tcp", false, 1)),
    ));
    out.push(Ratio::new(
        "homa / tcp Gbit/s, 4 outstanding, one thread each".to_string(),
        ratio(gbps("homa", true, 4), gbps("tcp", true, 4)),
    ));
    out.push(Ratio::new(
        "homa one thread / tcp thread per RPC, 4 outstanding".to_string(),
        ratio(gbps("homa", true, 4), gbps("tcp", false, 4)),
    ));
    out.push(Ratio::new(
        "homa / tcp Gbit/s, 4 outstanding, thread per RPC".to_string(),
        ratio(gbps("homa", false, 4), gbps("tcp", false, 4)),
    ));
    let rate = |proto, pipelined| {
        find_row(
            rows,
            "clients",
            proto,
            false,
            false,
            pipelined,
            MANY_CLIENTS,
        )
        .filter(|r| r.rpcs > 0)
        .map(|r| r.rpcs_per_s)
    };
    out.push(Ratio::new(
        format!("homa / tcp RPC/s, {MANY_CLIENTS} clients, one thread each"),
        ratio(rate("homa", true), rate("tcp", true)),
    ));
    out.push(Ratio::new(
        format!("homa / tcp RPC/s, {MANY_CLIENTS} clients, thread per client"),
        ratio(rate("homa", false), rate("tcp", false)),
    ));
    let cpu = |proto| {
        rows.iter()
            .find(|r| {
                r.test == "latency"
                    && r.protocol == proto
                    && !r.busy_poll
                    && !r.no_poll
                    && r.concurrency == 1
            })
            .and_then(|r| r.cpu_us_per_rpc)
    };
    out.push(Ratio::new(
        "homa CPU per RPC / tcp CPU per RPC, 100 B, blocking".to_string(),
        ratio(cpu("homa"), cpu("tcp")),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(values: &[Option<f64>]) -> Vec<Ratio> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| Ratio::new(format!("r{i}"), *v))
            .collect()
    }

    #[test]
    fn the_spread_is_the_lowest_and_highest_round() {
        let mut whole = named(&[Some(1.0), Some(2.0), None]);
        let rounds = vec![
            named(&[Some(1.2), None, None]),
            named(&[Some(0.9), Some(2.5), None]),
            named(&[Some(1.1), Some(1.5), Some(3.0)]),
        ];
        set_spread(&mut whole, &rounds);
        assert_eq!((whole[0].low, whole[0].high), (Some(0.9), Some(1.2)));
        // A round that missed a side does not count.
        assert_eq!((whole[1].low, whole[1].high), (Some(1.5), Some(2.5)));
        // One round alone gives no spread (nor does it set the value).
        assert_eq!(
            (whole[2].low, whole[2].high, whole[2].value),
            (None, None, None)
        );
        // Nor do rounds that measured a ratio the whole run has none of.
        let mut failed = named(&[None]);
        set_spread(&mut failed, &[named(&[Some(1.0)]), named(&[Some(2.0)])]);
        assert_eq!((failed[0].low, failed[0].high), (None, None));
    }

    #[test]
    fn one_round_gives_no_spread() {
        let mut whole = named(&[Some(1.0)]);
        set_spread(&mut whole, &[named(&[Some(1.3)])]);
        assert_eq!((whole[0].low, whole[0].high), (None, None));
        let json = serde_json::to_value(&whole[0]).unwrap();
        assert!(json.get("low").is_none(), "{json}");
    }

    #[test]
    fn ratios_of_no_rows_are_all_missing() {
        let r = ratios(&[]);
        assert_eq!(r.len(), 12);
        assert!(r.iter().all(|x| x.value.is_none()));
    }
}
