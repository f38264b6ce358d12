//! The simulator's two text parsers: workload CSVs and TOML scenarios.
//! Neither may panic on any input; whatever parses must be usable.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    if which & 1 == 0 {
        if let Ok(d) = homa_sim::workload::SizeDist::from_csv_str("fuzz", text) {
            // A parsed distribution answers every query.
            let mean = d.mean();
            assert!(mean >= d.min() as f64 && mean <= d.max() as f64 * (1.0 + 1e-9));
            let _ = d.quantile(0.5);
            let _ = d.cdf(d.max());
        }
    } else if let Ok(s) = homa_sim::scenario::Scenario::from_toml_str(text, "fuzz") {
        let _ = homa_sim::topology::Topology::new(s.topology.clone());
    }
});
